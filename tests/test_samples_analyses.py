"""Per-case analyses of a run with several answer samples: each answer (case x sample) is one unit where a
rater or an item is judged, and a case's value is the mean over its answers, never samples mixed up as
passes of one answer."""

from __future__ import annotations

import polars as pl
import pytest

from tests.analysis_sim import rule_decisions
from tests.samples_support import write_samples
from toolkit.analysis import AgreementOptions, judge_agreement
from toolkit.analysis.harms import harm_cases
from toolkit.analysis.items import item_rates
from toolkit.analysis.judge_noise import rater_scores, within_variance
from toolkit.analysis.paired import ResampleSettings
from toolkit.selection import read_runs
from toolkit.store import Store


def _run(store: Store, dataset, passes_of: dict[int, int]) -> None:
    """Run "r": sample 0 endorses exactly the positive items, sample 1 exactly the negative ones; sample k is
    judged ``passes_of[k]`` times, every pass deciding alike."""
    frames = []
    for sample, matched in ((0, pl.col("points") > 0), (1, pl.col("points") < 0)):
        for judge_pass in range(1, passes_of[sample] + 1):
            frames.append(rule_decisions(dataset, "r", matched, judge_pass=judge_pass)
                          .with_columns(sample=pl.lit(sample, pl.Int32)))
    write_samples(store, dataset, "r", pl.concat(frames))


def test_items_weigh_each_answer_alike_whatever_its_passes(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, {0: 1, 1: 3})
    rates = item_rates(read_runs(store, ["r"], texts=False))
    positive = rates.filter(pl.col("points") > 0)
    # Sample 0 matched every positive item (1 pass), sample 1 none (3 passes): 0.5, not 1/4.
    assert set(positive["matched"]) == {0.5} and set(positive["passes"]) == {4}


def test_harms_are_the_mean_over_answers(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, {0: 1, 1: 3})
    cases = harm_cases(read_runs(store, ["r"], texts=False))
    assert cases.height > 0
    # Sample 0 has recall 1, sample 1 recall 0: each case's recall is their mean, whatever the pass counts.
    assert set(cases["recall"]) == {0.5}


def test_judge_noise_and_agreement_do_not_take_answers_for_raters(store: Store, sample_dataset) -> None:
    """Two passes that agree on every decision of both answers: no judge noise and perfect agreement,
    though the two answers score far apart."""
    _run(store, sample_dataset, {0: 2, 1: 2})
    data = read_runs(store, ["r"], texts=False)
    within = within_variance(rater_scores(data))
    assert within["within_var"].max() == pytest.approx(0.0, abs=1e-15)
    agreement = judge_agreement(data, AgreementOptions(resamples=ResampleSettings(samples=200)))
    decided = rule_decisions(sample_dataset, "r", pl.lit(True)).height
    assert agreement.summary["items"].to_list() == [2 * decided]  # each answer's item is a unit
    assert agreement.summary["percent_agreement"].to_list() == [1.0]
    assert set(agreement.flips["raters"]) == {2} and agreement.flips["score_range"].max() == 0.0


def test_a_failed_sample_is_a_failed_case_though_another_sample_succeeded(store: Store, sample_dataset) -> None:
    from toolkit.failures import failure_causes
    from toolkit.summary import summarize

    _run(store, sample_dataset, {0: 1, 1: 1})
    case = sample_dataset.cases["case_id"][0]
    store.commit_run("r", {"answers": [{"run_id": "r", "case_id": case, "sample": 2, "attempt": 1, "seq": 99_999,
                                        "error": "APITimeoutError: Request timed out."}]})
    causes = failure_causes(store, "r")
    assert [(c.cause, c.cases) for c in causes] == [("APITimeoutError", 1)]
    summary = summarize(store, ["r"])["r"]
    assert summary["errors"] == 1 and summary["completed_cases"] == sample_dataset.cases.height
