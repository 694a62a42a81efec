"""The report's "Judge vs physicians" section, shown when the compared runs have physician labels: the
judge's accuracy per item class (with the physicians' own agreement as the ceiling), the leaderboard as the
judge scores it beside the scores corrected by the labels, and the items the judge gets wrong most often
(``toolkit.analysis.physicians``)."""

from __future__ import annotations

import polars as pl

from toolkit.protocol import severity_label
from toolkit.analysis.physicians import OVERALL, PhysicianCheck
from toolkit.report.analyses import Analyses
from toolkit.report.model import Cell, Section, Table, interval, num, pct, signed


def physician_section(a: Analyses) -> Section | None:
    """The section, or None when no compared run has physician labels (the check ``analyse`` made)."""
    title = "Judge vs physicians"
    if a.physicians_absent is not None:
        return Section("physicians", title, paragraphs=[f"Nothing to show: {a.physicians_absent}"])
    check = a.physicians
    if check is None:
        return None
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


def corrected_scores(a: Analyses) -> list[str]:
    """The summary's sentence on the physician labels, none without them: the ranked runs' corrected overall
    scores beside the judge's, and whether they keep the leaderboard's order."""
    corrected = _overall(a.physicians.corrected) if a.physicians is not None else {}
    shown = [r for r in a.cmp.leaderboard["run_id"].to_list() if r in corrected]
    if not shown:
        return []
    return [_scores_sentence(shown, corrected)]


def corrected_pair(a: Analyses, pair: dict, always: bool = True) -> str:
    """A sentence to follow the summary's sentence on ``pair`` (a pairwise row, oriented as the summary says
    it): the corrected difference beside the judge's and whether the decision (95% interval excludes 0)
    changes; "" without labels of both runs, or when not ``always`` and the decision does not change (the
    summary's later pairs: their corrected differences are in the section, the first screen stays short)."""
    if a.physicians is None:
        return ""
    diffs = {(r["run_a"], r["run_b"]): r for r in
             a.physicians.differences.filter(pl.col("benchmark") == OVERALL).iter_rows(named=True)}
    d = _oriented(diffs, pair["run_a"], pair["run_b"])
    if d is None:
        return ""
    judged = _side(pair["ci_low"], pair["ci_high"])
    corrected = None if d["mean"] is None else _side(d["ci_low"], d["ci_high"])
    if not always and (judged is None or corrected is None or judged == corrected):
        return ""
    return " " + _difference_sentence(pair, d)


def _overall(frame: pl.DataFrame) -> dict[str, dict]:
    return {r["run_id"]: r for r in frame.filter(pl.col("benchmark") == OVERALL).iter_rows(named=True)}


def _why(row: dict) -> str:
    """The short reason a corrected estimate has no interval: its note up to the colon."""
    return (row["ci_note"] or "no interval").split(":")[0]


def _value(row: dict, sign: bool = False) -> str:
    if row["ci_low"] is None or row["ci_high"] is None:
        return f"{signed(row['mean']) if sign else num(row['mean'])} with no interval ({_why(row)})"
    return interval(row["mean"], row["ci_low"], row["ci_high"], sign=sign)


def _scores_sentence(shown: list[str], corrected: dict) -> str:
    """The judge's own scores are the leaderboard's, just below: only the corrected ones here (one screen)."""
    parts = [f"{run} {_value(corrected[run])}" if corrected[run]["mean"] is not None
             else f"{run} not corrected ({_why(corrected[run])})" for run in shown]
    line = "Corrected by the physician labels (PPI++), the overall scores are " + ", ".join(parts)
    ranked = [r for r in shown if corrected[r]["mean"] is not None]
    if len(ranked) < 2:
        return line + "."
    by_corrected = sorted(ranked, key=lambda r: -corrected[r]["mean"])  # stable: ties keep the judge's order
    if by_corrected == ranked:
        return line + ": the judge's order."
    return (line + ": another order than the judge's leaderboard (point estimates): "
            + ", ".join(by_corrected) + ".")


def _oriented(diffs: dict, a: str, b: str) -> dict | None:
    """The corrected overall difference a − b (the check's b − a turned round), None when not both labelled."""
    if (a, b) in diffs:
        return diffs[(a, b)]
    row = diffs.get((b, a))
    if row is None:
        return None
    turn = {k: (None if row[k] is None else -row[k]) for k in ("mean", "judge_mean", "ci_low", "ci_high")}
    return {**row, **turn, "ci_low": turn["ci_high"], "ci_high": turn["ci_low"], "run_a": a, "run_b": b}


def _side(low: float | None, high: float | None) -> int | None:
    """+1 / -1 when the interval excludes 0 above / below it, 0 when it holds 0, None without an interval."""
    if low is None or high is None or low != low or high != high:
        return None
    return 1 if low > 0 else -1 if high < 0 else 0


def _difference_sentence(pair: dict, d: dict) -> str:
    judge = f"judge {signed(pair['delta'])}"
    head = f"Corrected by the physician labels: {pair['run_a']} − {pair['run_b']} "
    if d["mean"] is None:
        return head + f"not estimated ({_why(d)}; {judge})."
    corrected, judged = _side(d["ci_low"], d["ci_high"]), _side(pair["ci_low"], pair["ci_high"])
    if corrected is None:
        return head + f"= {_value(d, sign=True)} ({judge})."
    line = head + f"= {_value(d, sign=True)} over {d['labelled_cases']} labelled cases ({judge})"
    if judged is None:
        return line + "."
    if judged == corrected:
        return line + ("; both intervals exclude 0, the same decision." if judged
                       else "; neither interval excludes 0, the same decision.")
    if judged and corrected:
        return line + "; the decision changes: both intervals exclude 0, on opposite sides."
    if judged:
        return line + "; the decision changes: the judge's interval excludes 0, the corrected one does not."
    return line + "; the decision changes: the corrected interval excludes 0, the judge's does not."
