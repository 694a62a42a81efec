"""The report's Reliability section, shown only when some compared run has K > 1 answers per case: the
variance budget (``toolkit.analysis.variance``) of each run and worst-at-k / pass^k, with their CSV twins."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.variance import OVERALL, VarianceBudget, VarianceOptions, variance_budget
from toolkit.report.model import Cell, Section, Table, interval, num, pct
from toolkit.selection import JudgeSelection, RunData, pass_level_scores


def reliability_budget(data: RunData, runs: list[str], answers: dict[str, int], resamples: ResampleSettings,
                       selection: JudgeSelection) -> tuple[VarianceBudget | None, str | None]:
    """The budget of the compared ``runs`` (leaderboard order) when one of them has K > 1 (``answers``: run ->
    K), each run on its own (the same draws as ``bedside variance`` gives it); a run that cannot be split
    (unbalanced) is left out with its reason. (None, why) when no run has several answers or none is left."""
    if max(answers.values(), default=1) < 2:
        return None, None
    frame = pass_level_scores(data, selection)
    options = VarianceOptions(resamples=resamples, selection=selection)
    parts, notes = [], []
    for run in runs:
        mine = frame.filter(pl.col("run_id") == run)
        if mine.is_empty():
            continue
        try:
            parts.append(variance_budget(mine, options))
        except ValueError as error:
            notes.append(str(error))
    if not parts:
        return None, "; ".join(notes) or "no run has a scored answer"
    joined = {name: pl.concat([getattr(p, name) for p in parts]) for name in
              ("components", "intervals", "worst_at_k", "pass_k", "design")}
    notes += [n for p in parts for n in p.notes]
    if any("(J = 1)" in n for n in notes):
        notes += judge_hints(data, [r for r in runs if r in set(frame["run_id"].to_list())], selection)
    return VarianceBudget(**joined, notes=list(dict.fromkeys(notes))), None


def judge_hints(data: RunData, runs: list[str], selection: JudgeSelection) -> list[str]:
    """Where the judge used grades each answer once, another judge of the same answers with 2 or more passes
    per answer splits the judge component: one line per such judge with the command line that does it."""
    import shlex

    used = {r: selection.judge or j for r, j in data.runs.select("run_id", "judge_model").iter_rows()}
    graded = data.judgments.filter(pl.col("run_id").is_in(runs) & pl.col("error").is_null())
    passes = (graded.group_by("run_id", "judge_model", "case_id", "sample").agg(pl.col("judge_pass").n_unique())
              .group_by("run_id", "judge_model").agg(pl.col("judge_pass").min()))
    lines = []
    for judge, rows in passes.filter(pl.col("judge_pass") >= 2).group_by("judge_model", maintain_order=True):
        mine = [r for r in runs if r in set(rows["run_id"].to_list()) and used.get(r) != judge[0]]
        if mine:
            picks = " ".join(f"--run {shlex.quote(r)}" for r in mine)
            least = int(rows.filter(pl.col("run_id").is_in(mine))["judge_pass"].min())
            lines.append(f"judge {judge[0]} graded every answer of {', '.join(mine)} {least} times or more: its "
                         f"passes split the judge component (`bedside variance {picks} --judge "
                         f"{shlex.quote(judge[0])}`, or this report with `--judge {shlex.quote(judge[0])}`)")
    return lines


def _design(budget: VarianceBudget, run: str) -> str:
    row = budget.design.filter((pl.col("run_id") == run) & (pl.col("benchmark") == OVERALL)).row(0, named=True)
    return f"{row['n_cases']} cases × {row['answers_per_case']} answers × {row['passes_per_answer']} passes"


def components_table(budget: VarianceBudget) -> Table:
    """Per run (overall, macro over benchmarks): each component with its interval and its share of the
    variance of the run mean; the CSV holds every benchmark too."""
    body = []
    overall = budget.components.filter(pl.col("benchmark") == OVERALL)
    for r in overall.iter_rows(named=True):
        body.append([Cell(r["run_id"]), Cell(_design(budget, r["run_id"]), kind="num"), Cell(r["component"]),
                     Cell(interval(r["variance"], r["ci_low"], r["ci_high"], digits=4), kind="num",
                          title=r["ci_note"]),
                     Cell(pct(r["share"]), kind="num")])
    return Table("reliability_components", "Variance budget of a case score (overall: components averaged over "
                 "benchmarks; share: of the variance of the run mean)",
                 ["run", "design", "component", "variance [95% CI]", "share"], body, budget.components)


def intervals_table(budget: VarianceBudget) -> Table:
    body = [[Cell(r["run_id"]), Cell(r["kind"].replace("_", " ")),
             Cell(interval(r["mean"], r["ci_low"], r["ci_high"]), kind="num"), Cell(r["note"] or "–")]
            for r in budget.intervals.iter_rows(named=True)]
    return Table("reliability_intervals", "Two intervals of the run mean: new cases (answer and judge variance "
                 "included) and the same cases answered again", ["run", "interval", "mean [95% CI]", "what it covers"],
                 body, budget.intervals)


def at_k_table(budget: VarianceBudget) -> Table:
    """Per run and k (overall): worst-at-k and pass^k with intervals; the CSV holds every benchmark."""
    keys = ["run_id", "benchmark", "k"]
    frame = budget.worst_at_k.rename({"value": "worst_at_k", "ci_low": "worst_ci_low", "ci_high": "worst_ci_high",
                                      "ci_note": "worst_ci_note"}).join(
        budget.pass_k.rename({"value": "pass_k", "ci_low": "pass_ci_low", "ci_high": "pass_ci_high",
                              "ci_note": "pass_ci_note"}), on=keys, how="left", maintain_order="left")
    body = []
    for r in frame.filter(pl.col("benchmark") == OVERALL).iter_rows(named=True):
        threshold = "–" if r["threshold"] is None else num(r["threshold"], 2)
        body.append([Cell(r["run_id"]), Cell(str(r["k"]), kind="num"),
                     Cell(interval(r["worst_at_k"], r["worst_ci_low"], r["worst_ci_high"]), kind="num",
                          title=r["worst_ci_note"]),
                     Cell(interval(r["pass_k"], r["pass_ci_low"], r["pass_ci_high"]), kind="num",
                          title=r["pass_ci_note"]), Cell(threshold, kind="num")])
    return Table("reliability_at_k", "Worst-at-k (expected lowest score among k answers to a case) and pass^k "
                 "(chance that k answers all reach the threshold), macro over benchmarks",
                 ["run", "k", "worst-at-k [95% CI]", "pass^k [95% CI]", "threshold"], body, frame)


def reliability_section(budget: VarianceBudget | None, why: str | None, figures: list) -> Section | None:
    """None when no compared run has K > 1 (the report then has no such section)."""
    if budget is None and why is None:
        return None
    section = Section("reliability", "Reliability", figures=figures)
    if budget is None:
        section.paragraphs.append(f"Nothing to show: {why}")
        return section
    section.paragraphs.append(
        "Runs with several answers per case: how much of the spread of a run's mean comes from which cases were "
        "drawn, from the answers to a case, and from the judge's passes (a nested analysis of variance; "
        "intervals resample cases whole), and how reliably the answers score. The leaderboard's intervals "
        "already include answer and judge variance, since a case score averages its answers and passes.")
    section.tables += [components_table(budget), intervals_table(budget), at_k_table(budget)]
    section.bullets += budget.notes
    return section
