"""Per-answer views of a run with several answer samples use every answer: answer_usage has one row per
answer, length_bias plots each answer at its own score, cost counts all K answers of a case, and the report's
side-by-side view shows every answer of a case. A run asked once is shown as before."""

from __future__ import annotations

import polars as pl
import pytest

from tests.samples_support import sample_decisions, write_samples
from toolkit import figures
from toolkit.figures.cases import answer_usage
from toolkit.selection import per_case, per_sample, read_runs
from toolkit.store import Store


def _write(store: Store, dataset, run_id: str, samples: int) -> None:
    """A run of ``samples`` answers per case whose texts (and tokens) differ in length between samples."""
    write_samples(store, dataset, run_id, sample_decisions(dataset, run_id, samples, seed=3), answer=lambda r, i: {
        "answer_model": "m", "answer": f"sample {r['sample']} " + "x" * (20 * r["sample"] + i % 7),
        "prompt_tokens": 100, "completion_tokens": 10 * (r["sample"] + 1), "latency_s": 1.0})


def test_usage_and_length_bias_take_every_answer(store: Store, sample_dataset) -> None:
    _write(store, sample_dataset, "k3", 3)
    data = read_runs(store, ["k3"])
    cases = sample_dataset.cases.height
    usage = answer_usage(data)
    assert usage.height == 3 * cases and sorted(usage["sample"].unique()) == [0, 1, 2]
    answers = per_sample(data)
    frame = figures.length_bias_data(data, answers)
    assert frame.height == 3 * cases  # each answer a point at its own score and length
    texts = {(r["case_id"], r["sample"]): len(r["answer"]) for r in data.answers.iter_rows(named=True)}
    scores = {(r["case_id"], r["sample"]): r["score"] for r in answers.iter_rows(named=True)}
    for row in frame.iter_rows(named=True):
        assert row["length"] == texts[row["case_id"], row["sample"]]
        assert row["score"] == scores[row["case_id"], row["sample"]]
    fig = figures.length_bias(data, answers)
    assert "each answer a point" in fig.axes[0].get_title(loc="left")
    # cost: a case costs its three answers' tokens
    costs = figures.cost_data(data, per_case(data))
    assert costs["tokens_per_case"][0] == pytest.approx(3 * 100 + 10 + 20 + 30)
    assert costs["cases_with_usage"][0] == cases


def test_a_run_asked_once_keeps_one_point_per_case(store: Store, sample_dataset) -> None:
    _write(store, sample_dataset, "k1", 1)
    data = read_runs(store, ["k1"])
    cases = per_case(data)
    frame = figures.length_bias_data(data, cases)
    assert frame.height == cases.height and "sample" not in frame.columns
    assert "each answer" not in figures.length_bias(data, cases).axes[0].get_title(loc="left")
    assert figures.cost_data(data, cases)["tokens_per_case"][0] == pytest.approx(110)


def test_the_side_by_side_view_shows_every_answer_of_a_case(store: Store, sample_dataset, tmp_path) -> None:
    from toolkit.report import ReportOptions, write_report

    _write(store, sample_dataset, "k3", 3)
    _write(store, sample_dataset, "k1", 1)
    report = write_report(store, None, tmp_path / "r", ReportOptions(samples=100, seed=1))
    markdown = report.markdown.read_text(encoding="utf-8")
    differ = markdown.split("## Where runs differ most", 1)[1].split("\n## ", 1)[0]
    assert "answer 1 of 3 (sample 0, score" in differ and "answer 3 of 3 (sample 2, score" in differ
    assert "of 1 (" not in differ  # the run asked once: its one answer, as before
