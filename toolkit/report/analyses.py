"""Every analysis a report shows, computed once from one read of the store, with the time each phase took."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import polars as pl

from toolkit.analysis import (Agreement, AgreementOptions, Comparison, CompareOptions, HarmOptions, ItemAnalysis,
                              ItemOptions, ResampleSettings, analyse_items, compare_data, harms, judge_agreement)
from toolkit.analysis.compare import answers_per_case
from toolkit.analysis.costs import run_costs
from toolkit.analysis.harms import BOTH, severe_rate_difference
from toolkit.analysis.variance import VarianceBudget
from toolkit.analysis.pairs import OVERALL_FAMILY
from toolkit.analysis.physicians import PhysicianCheck, PhysicianOptions, judge_vs_physicians
from toolkit.bootstrap import BootstrapSettings
from toolkit.prices import PriceTable, load_prices
from toolkit.report.reliability import reliability_budget
from toolkit.selection import JudgeSelection, RunData, per_case, per_sample, read_runs
from toolkit.store import Store
from toolkit.summary import SummaryOptions, summarize_data


@dataclass(frozen=True)
class Timings:
    """Wall seconds per phase, in the order the phases ran."""

    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

@dataclass(frozen=True, eq=False)
class Analyses:
    """The frames the report is built from. Optional analyses are None with the reason in ``absent``."""

    data: RunData
    cases: pl.DataFrame  # per_case: one row per run x completed case
    cmp: Comparison
    pairs: pl.DataFrame  # cmp's overall pairwise rows as compare oriented them (every pair, or each run vs baseline)
    items: ItemAnalysis | None
    harm: pl.DataFrame | None
    agreement: Agreement | None
    reference: dict[str, dict]  # run id -> ``bedside summary`` object (the reference runner's intervals)
    absent: dict[str, str]  # section -> why it has nothing to show
    baseline: str | None
    costs: pl.DataFrame | None = None  # toolkit.analysis.costs.run_costs of the compared runs
    variance: VarianceBudget | None = None  # the compared runs' budget when one has K > 1 answers per case
    samples: pl.DataFrame | None = None  # per_sample (one row per answer) when one has K > 1, else None
    severe_gap: dict | None = None  # the paired row: highest minus lowest severe-error share (``severe_extremes``)
    # judge_vs_physicians of the compared runs, read and computed once for the summary and the physicians
    # section; None without labels (no section), else ``physicians_absent`` says why there is no check.
    physicians: PhysicianCheck | None = None
    physicians_absent: str | None = None


def severe_extremes(harm: pl.DataFrame | None) -> tuple[dict, dict] | None:
    """(lowest, highest) pooled severe-error share rows of the runs, None with fewer than two runs."""
    if harm is None:
        return None
    severe = harm.filter((pl.col("scope") == BOTH) & (pl.col("metric") == "severe_rate")).sort("value")
    return (severe.row(0, named=True), severe.row(-1, named=True)) if severe.height > 1 else None


def analyse(store: Store, run_ids: list[str], resamples: ResampleSettings, selection: JudgeSelection,
            baseline: str | None, allow_mixed: bool, timings: Timings, prices: PriceTable | None = None) -> Analyses:
    with timings.phase("read"):
        data = read_runs(store, run_ids, texts=True)
    with timings.phase("analysis"):
        try:
            cmp = compare_data(data, CompareOptions(resamples=resamples, allow_mixed=allow_mixed,
                                                    selection=selection, baseline=baseline))
        except ValueError as error:
            raise ValueError(f"report: {error}") from None
        kept = cmp.leaderboard["run_id"].to_list() + cmp.not_ranked["run_id"].to_list()
        # Every section reads the compared runs only: a run the comparison left out (another dataset or
        # judge) must not reach the items, harms or judges sections either.
        data = data.of(kept)
        cases = per_case(data, selection)
        absent: dict[str, str] = {}
        items = _optional("items", absent, lambda: analyse_items(data, ItemOptions(selection=selection, top=10)))
        harm = _optional("harms", absent, lambda: harms(data, HarmOptions(selection=selection, resamples=resamples)))
        agreement = _optional("judges", absent, lambda: judge_agreement(data, AgreementOptions(
            judge=selection.judge, passes=selection.passes, resamples=resamples, top=10)))
        reference = summarize_data(data, kept, SummaryOptions(
            bootstrap=BootstrapSettings(samples=resamples.samples, seed=resamples.seed), selection=selection))
        costs = run_costs(data, load_prices(prices))
        answers = answers_per_case(data, kept)
        variance, why = reliability_budget(data, kept, answers, resamples, selection)
        if why is not None:
            absent["reliability"] = why
        samples = per_sample(data, selection) if max(answers.values(), default=1) > 1 else None
        extremes = severe_extremes(harm)
        gap = None if extremes is None else severe_rate_difference(data, extremes[1]["run_id"],
                                                                   extremes[0]["run_id"], selection)
    with timings.phase("read"):
        labels = stored_labels(store, kept)
    check, why = None, None
    if labels is not None:
        with timings.phase("analysis"):
            try:
                check = judge_vs_physicians(data, labels, PhysicianOptions(resamples=resamples, selection=selection))
            except ValueError as error:
                why = str(error)
    return Analyses(data, cases, cmp, cmp.pairwise.filter(pl.col("family") == OVERALL_FAMILY), items, harm,
                    agreement, reference, absent, baseline, costs, variance, samples, gap, check, why)


def stored_labels(store: Store, run_ids: list[str]) -> pl.DataFrame | None:
    """The ``human_labels`` rows of these runs; None when there are none."""
    from toolkit.labels import read_labels

    labels = read_labels(store, run_ids)
    return labels if labels.height else None


def _optional(section: str, absent: dict[str, str], compute):  # noqa: ANN001, ANN202 - a thunk and its value
    """The analysis, or None with the reason (its one-line ValueError) kept for the report."""
    try:
        return compute()
    except ValueError as error:
        absent[section] = str(error)
        return None
