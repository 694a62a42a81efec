"""The report's "Judge vs physicians" section, shown when the compared runs have physician labels: the
judge's accuracy per item class (with the physicians' own agreement as the ceiling), the leaderboard as the
judge scores it beside the scores corrected by the labels, and the items the judge gets wrong most often
(``toolkit.analysis.physicians``)."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.paired import ResampleSettings
from toolkit.protocol import severity_label
from toolkit.analysis.physicians import OVERALL, PhysicianCheck, PhysicianOptions, judge_vs_physicians
from toolkit.report.analyses import Analyses
from toolkit.report.model import Cell, Section, Table, interval, num, pct, signed
from toolkit.selection import JudgeSelection
from toolkit.store import Store


def stored_labels(store: Store, run_ids: list[str]) -> pl.DataFrame | None:
    """The ``human_labels`` rows of these runs; None when there are none."""
    from toolkit.labels import read_labels

    labels = read_labels(store, run_ids)
    return labels if labels.height else None


def physician_section(store: Store, a: Analyses, resamples: ResampleSettings, selection: JudgeSelection
                      ) -> Section | None:
    """The section, or None when no compared run has physician labels."""
    runs = a.data.runs["run_id"].to_list()
    labels = stored_labels(store, runs)
    if labels is None:
        return None
    title = "Judge vs physicians"
    try:
        check = judge_vs_physicians(a.data, labels, PhysicianOptions(resamples=resamples, selection=selection))
    except ValueError as error:
        return Section("physicians", title, paragraphs=[f"Nothing to show: {error}"])
    board = (a.cmp.leaderboard["run_id"].to_list()
             + a.cmp.not_ranked.get_column("run_id", default=pl.Series([])).to_list())
    return Section("physicians", title, paragraphs=[
        "Physicians labelled a random sample of cases item by item. The judge's decisions are set against "
        "theirs, and each run's score is corrected by them: the labelled cases' physician scores together with "
        "every case's judge score (PPI++), so the corrected interval is valid for what physicians would score."],
        tables=[accuracy_table(check), side_by_side(a, check, board), *difference_table(check),
                errors_table(check)],
        bullets=check.notes)


def class_words(item_class: str) -> str:
    """"class 9" as "class 9 = +3 points, essential" (``protocol.severity_label``); other classes as they are."""
    head, _, number = item_class.partition(" ")
    return severity_label(int(number)) if head == "class" and number.isdigit() else item_class


def _accuracy_rows(frame: pl.DataFrame) -> list[list[Cell]]:
    rows = []
    for r in frame.iter_rows(named=True):
        row = [Cell(class_words(r["item_class"])), Cell(str(r["items"]), kind="num"), Cell(str(r["unsure"]), kind="num"),
               *(Cell(interval(r[n], r[f"{n}_low"], r[f"{n}_high"]), kind="num")
                 for n in ("sensitivity", "specificity", "agreement"))]
        row.append(Cell(interval(r["kappa"], r["kappa_low"], r["kappa_high"]), kind="num"))
        rows.append(row)
    return rows


def accuracy_table(check: PhysicianCheck) -> Table:
    """Per item class: the judge against the physicians, then the physicians' own kappa where double-graded."""
    ceiling = {r["item_class"]: r for r in check.physician_agreement.iter_rows(named=True)}
    body = [row + [Cell(interval(ceiling[name]["kappa"], ceiling[name]["kappa_low"], ceiling[name]["kappa_high"])
                        if name in ceiling else "–", kind="num")]
            for name, row in zip(check.agreement["item_class"].to_list(), _accuracy_rows(check.agreement))]
    columns = ["item class", "items", "unsure", "sensitivity [95% CI]", "specificity [95% CI]",
               "agreement [95% CI]", "judge κ [95% CI]", "physician κ (ceiling)"]
    return Table("physicians_accuracy", "The judge against the physicians per item class (one pass of it); "
                 "the last column is the physicians' agreement with each other on double-graded items",
                 columns, body, check.agreement)


def side_by_side(a: Analyses, check: PhysicianCheck, order: list[str]) -> Table:
    """Each run's overall score as the judge gives it (the leaderboard's interval) and as corrected."""
    judge = {r["run_id"]: r for r in a.cmp.leaderboard.iter_rows(named=True)}
    corrected = {r["run_id"]: r for r in check.corrected.filter(pl.col("benchmark") == OVERALL).iter_rows(named=True)}
    body = []
    for run in [r for r in order if r in corrected]:
        j, c = judge.get(run), corrected[run]
        body.append([Cell(run), Cell(interval(j["overall"], j["ci_low"], j["ci_high"]) if j else "–", kind="num"),
                     Cell(interval(c["mean"], c["ci_low"], c["ci_high"]), kind="num", title=c["ci_note"]),
                     Cell(num(None if c["mean"] is None or c["judge_mean"] is None else c["judge_mean"] - c["mean"]),
                          kind="num"),
                     Cell(str(c["labelled_cases"]), kind="num"), Cell(str(c["labels"]), kind="num"),
                     Cell(str(c["cases"]), kind="num")])
    columns = ["run", "judge only [95% CI]", "corrected [95% CI]", "judge − corrected", "labelled cases", "labels",
               "cases"]
    return Table("physicians_leaderboard", "Leaderboard as the judge scores it and corrected by the physician labels "
                 "(macro mean over benchmarks)", columns, body, check.corrected)


def difference_table(check: PhysicianCheck) -> list[Table]:
    rows = check.differences.filter(pl.col("benchmark") == OVERALL)
    if rows.is_empty():
        return []
    body = [[Cell(r["run_a"]), Cell(r["run_b"]), Cell(signed(r["judge_mean"]), kind="num"),
             Cell(interval(r["mean"], r["ci_low"], r["ci_high"], sign=True), kind="num", title=r["ci_note"]),
             Cell(str(r["labelled_cases"]), kind="num")] for r in rows.iter_rows(named=True)]
    return [Table("physicians_differences", "Paired differences, judge only and corrected (A − B over the cases "
                  "both runs scored)", ["run A", "run B", "judge only", "corrected [95% CI]", "labelled cases"],
                  body, check.differences)]


def errors_table(check: PhysicianCheck) -> Table:
    body = [[Cell(r["benchmark"]), Cell(f"{r['points']:+g}", kind="num"), Cell(r["text"]),
             Cell(f"{r['errors']} of {r['labelled']}", kind="num"), Cell(pct(r["error_rate"]), kind="num"),
             Cell(f"{r['judge_false_met']} / {r['judge_false_not_met']}", kind="num")]
            for r in check.judge_errors.iter_rows(named=True)]
    return Table("physicians_errors", "Rubric items the judge gets wrong most often against the physicians",
                 ["benchmark", "points", "item", "wrong", "rate", "judge says met / not met wrongly"], body,
                 check.judge_errors)
