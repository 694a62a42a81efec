"""Issue 28, item 8: with physician labels the report's summary gives the physician-corrected scores and
differences beside the judge's, and says when they put the runs in another order or change a pair's decision
(interval excludes 0 or not); without labels it is unchanged. Two simulated runs, "strong" and "weak", in
stores that differ only in their labels: labels that follow the judge (5% flipped), labels that contradict it
on every item, labels on 5 cases only (too few for an interval), and none."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.analysis_sim import write_run
from tests.test_physicians_cli import physician_labels, store_labels
from toolkit.analysis import ResampleSettings
from toolkit.report import ReportOptions, write_report
from toolkit.report.analyses import Analyses, Timings, analyse
from toolkit.report.words import summary
from toolkit.selection import JudgeSelection

RUNS = ["strong", "weak"]
SETTINGS = ResampleSettings(200, 1)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, sample_dataset) -> dict[str, Path]:
    bare = tmp_path_factory.mktemp("corrected-summary") / "bare"
    store = bs.Store.open(bare)
    write_run(store, sample_dataset, "strong", 0.8, 1, passes=2)
    write_run(store, sample_dataset, "weak", -0.4, 2)
    out = {"bare": bare}
    for name, flip, cases in (("agree", 0.05, None), ("contradict", 1.0, None), ("few", 0.05, 5)):
        root = bare.parent / name
        shutil.copytree(bare, root, symlinks=True)
        labelled = bs.Store.open(root)
        decisions = labelled.read("decisions", RUNS)
        if cases is not None:  # the first few cases of each run only
            first = sorted(set(decisions["case_id"].to_list()))[:cases]
            decisions = decisions.filter(pl.col("case_id").is_in(first))
        store_labels(labelled, physician_labels(decisions, 4, flip=flip))
        out[name] = root
    return out


def _analyses(root: Path) -> Analyses:
    return analyse(bs.Store.open(root), RUNS, SETTINGS, JudgeSelection(), None, False, Timings())


def _check(root: Path) -> bs.PhysicianCheck:
    return bs.calibrate(bs.Store.open(root), RUNS, options=bs.PhysicianOptions(resamples=SETTINGS))


def _overall(frame: pl.DataFrame) -> list[dict]:
    return list(frame.filter(pl.col("benchmark") == "overall").iter_rows(named=True))


def _ci(value: float, low: float, high: float, sign: bool = False) -> str:
    f = "{:+.3f}" if sign else "{:.3f}"
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


CLAUSE = " Corrected by the physician labels: "


def _pair_line(lines: list[str]) -> str:
    """The corrected sentence that follows the summary's sentence on strong and weak (in the same bullet)."""
    line = next(x for x in lines if x.startswith("strong ") and "weak" in x)
    assert CLAUSE + "strong − weak" in line, line
    return line.split(CLAUSE)[1]


def test_labels_that_contradict_the_judge_reverse_the_order_and_the_summary_says_so(stores) -> None:
    a = _analyses(stores["contradict"])
    lines = summary(a)
    check = _check(stores["contradict"])
    corrected = {r["run_id"]: r for r in _overall(check.corrected)}
    assert corrected["weak"]["mean"] > corrected["strong"]["mean"]  # the labels turn the judge's order round
    scores = next(x for x in lines if x.startswith("Corrected by the physician labels (PPI++") and "the overall scores are" in x)
    for run in RUNS:
        c = corrected[run]
        assert f"{run} {_ci(c['mean'], c['ci_low'], c['ci_high'])}" in scores, scores
    judge = {r["run_id"]: r["overall"] for r in a.cmp.leaderboard.iter_rows(named=True)}
    assert f"(judge {judge['strong']:.3f})" not in scores  # the leaderboard just below shows them
    assert "another order than the judge's leaderboard (point estimates): weak, strong" in scores, scores
    diff = _overall(check.differences)[0]
    assert (diff["run_a"], diff["run_b"]) == ("strong", "weak")
    pair = _pair_line(lines)
    judged = a.pairs.row(0, named=True)
    assert judged["ci_low"] > 0 and diff["ci_high"] < 0  # the judge says strong leads, the physicians weak
    assert (f"= {_ci(diff['mean'], diff['ci_low'], diff['ci_high'], sign=True)} over {diff['labelled_cases']} "
            f"labelled cases (judge {judged['delta']:+.3f})") in pair, pair
    assert "the decision changes" in pair and "opposite sides" in pair, pair


def test_labels_that_agree_with_the_judge_keep_its_order_and_decision(stores) -> None:
    a = _analyses(stores["agree"])
    lines = summary(a)
    scores = next(x for x in lines if x.startswith("Corrected by the physician labels (PPI++") and "the overall scores are" in x)
    assert "the judge's order." in scores and "another order" not in scores, scores
    diff = _overall(_check(stores["agree"]).differences)[0]
    pair = _pair_line(lines)
    assert diff["ci_low"] > 0 and a.pairs.row(0, named=True)["ci_low"] > 0
    assert _ci(diff["mean"], diff["ci_low"], diff["ci_high"], sign=True) in pair
    assert "both intervals exclude 0, the same decision" in pair and "changes" not in pair, pair


def test_too_few_labels_for_an_interval_are_said_in_a_clause(stores) -> None:
    lines = summary(_analyses(stores["few"]))
    diff = _overall(_check(stores["few"]).differences)[0]
    assert diff["ci_low"] is None and diff["mean"] is not None
    pair = _pair_line(lines)
    assert f"{diff['mean']:+.3f} with no interval (" in pair and "decision" not in pair, pair
    assert "labelled cases" in pair.split("with no interval (")[1]


def test_without_labels_the_summary_is_what_it_was(stores) -> None:
    bare = _analyses(stores["bare"])
    assert bare.physicians is None
    plain = summary(bare)
    labelled = summary(_analyses(stores["agree"]))
    added = [x for x in labelled if x.startswith("Corrected by the physician labels")]
    assert len(added) == 1 and sum(CLAUSE in x for x in labelled) == 1
    assert [x.split(CLAUSE)[0] for x in labelled if x not in added] == plain


def test_the_markdown_report_shows_the_same_sentences(stores, tmp_path) -> None:
    lines = [x for x in summary(_analyses(stores["contradict"])) if "Corrected by the physician" in x]
    assert len(lines) == 2
    paths = write_report(bs.Store.open(stores["contradict"]), None, tmp_path / "r",
                         ReportOptions(samples=200, seed=1, figures=False))
    markdown = Path(paths.markdown).read_text().replace("\\[", "[").replace("\\]", "]")
    summary_part = markdown.split("## Summary")[1].split("\n## ")[0]
    for line in lines:
        assert line in summary_part, line
    assert "## Judge vs physicians" in markdown
