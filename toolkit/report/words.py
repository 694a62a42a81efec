"""The report's sentences: the summary in words and the method notes, generated from the numbers."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.harms import BOTH
from toolkit.report.analyses import Analyses
from toolkit.report.model import interval, missing, num, p_text, pct
from toolkit.report.sections import ALPHA, with_mdd


def p_eq(value: float | None) -> str:
    text = p_text(value)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def _pair_sentence(r: dict) -> str:
    """A differing pair in words that follow the sign: "A leads B by d" or "A trails B by |d|" (the interval
    turned with it), never "leads by" a negative number."""
    if not missing(r["p_holm"]) and r["p_holm"] < ALPHA:
        behind = not missing(r["delta"]) and r["delta"] < 0
        size = (interval(-r["delta"], _neg(r["ci_high"]), _neg(r["ci_low"])) if behind
                else interval(r["delta"], r["ci_low"], r["ci_high"]))
        return (f"{r['run_a']} {'trails' if behind else 'leads'} {r['run_b']} by {size}, significant after Holm "
                f"({p_eq(r['p_holm'])}, {r['n_cases']} common cases).")
    diff = interval(r["delta"], r["ci_low"], r["ci_high"], sign=True)
    nominal = "" if missing(r["p_value"]) or r["p_value"] >= ALPHA else ", significant only before adjustment"
    return (f"{r['run_a']} and {r['run_b']} cannot be told apart: difference {diff}, Holm {p_eq(r['p_holm'])}"
            f"{nominal}; these {r['n_cases']} common cases could detect about {num(r['mdd80'], 2)} with 80% power.")


def _neg(value: float | None) -> float | None:
    return None if missing(value) else -value


def _first_place(board: pl.DataFrame) -> str:
    top = board.row(0, named=True)
    line = (f"{top['run_id']} ranks first with {interval(top['overall'], top['ci_low'], top['ci_high'])}; "
            f"it ranks first in {pct(top['share_first'])} of resamples")
    if "tie_group" in board.columns and not missing(top["tie_group"]):
        tied = board.filter((pl.col("tie_group") == top["tie_group"]) & (pl.col("run_id") != top["run_id"]))
        line += (f", tied (not told apart) with {', '.join(tied['run_id'].to_list())}" if tied.height
                 else ", alone in the top tie group")
    return line + "."


def _separability(a: Analyses) -> list[str]:
    frame = getattr(a.cmp, "separation", None)
    if frame is None or frame.is_empty() or not frame["adjacent_pairs"][0]:
        return []
    r = frame.row(0, named=True)
    return [f"Separability: {r['separated']} of {r['adjacent_pairs']} adjacent pairs on the leaderboard are told "
            f"apart (Holm p < {ALPHA} over all pairs); runs not told apart share a tie group."]


def not_ranked_lines(a: Analyses) -> list[str]:
    """One line per run the comparison did not rank, with why ("covers 2 of 10 benchmarks")."""
    frame = getattr(a.cmp, "not_ranked", None)
    if frame is None or frame.is_empty():
        return []
    return [f"not ranked: {r['run_id']} {r['reason']} (overall over what it has: "
            f"{interval(r['overall'], r['ci_low'], r['ci_high'])})" for r in frame.iter_rows(named=True)]


def summary(a: Analyses) -> list[str]:
    board = a.cmp.leaderboard.join(a.cmp.ranks.drop("rank"), on="run_id", how="left", maintain_order="left")
    lines = []
    if board.is_empty():  # every run was left unranked (e.g. smoke runs: one case per benchmark)
        return [f"No run is ranked: a ranking needs every benchmark covered with at least 2 cases; "
                f"{len(not_ranked_lines(a))} run(s) are listed below the (empty) leaderboard with their reasons."]
    judges = sorted({j for j in board["judge_model"].to_list() if j})
    runs = f"{board.height} runs" if board.height != 1 else "1 run"
    lines.append(f"{runs} compared on up to {int(board['completed'].max())} cases each, scored by "
                 f"{', '.join(judges) or 'no judge'}.")
    lines.append(_first_place(board))
    lines += _separability(a)
    pairs = with_mdd(a.pairs)
    if a.baseline is not None:
        lines.append(f"Against the baseline {a.baseline}:")
        rows = list(pairs.iter_rows(named=True))
    else:
        order = board["run_id"].to_list()
        key = {(r["run_a"], r["run_b"]): r for r in pairs.iter_rows(named=True)}
        rows = [key[(x, y)] for x, y in zip(order, order[1:]) if (x, y) in key]
    lines += [_pair_sentence(r) for r in rows]
    if a.baseline is None and pairs.height > len(rows):
        sig = int((pairs["p_holm"].fill_null(1.0) < ALPHA).sum())
        lines.append(f"Over all {pairs.height} pairs, {sig} differ after Holm's adjustment.")
    if a.harm is not None:
        severe = a.harm.filter((pl.col("scope") == BOTH) & (pl.col("metric") == "severe_rate")).sort("value")
        if severe.height > 1:
            best, worst = severe.row(0, named=True), severe.row(-1, named=True)
            lines.append(f"On the safety benchmarks, the share of cases with a severe error is lowest for "
                         f"{best['run_id']} ({num(best['value'], 2)}) and highest for {worst['run_id']} "
                         f"({num(worst['value'], 2)}).")
    failed = board.filter((pl.col("failed") > 0) | (pl.col("not_attempted") > 0))
    if failed.height:
        lines.append(f"{failed.height} run(s) have failed or not-attempted cases; see the warnings.")
    unranked = getattr(a.cmp, "not_ranked", None)
    if unranked is not None and unranked.height:
        lines.append(f"{unranked.height} run(s) not ranked (a ranking needs at least 2 cases in every benchmark): "
                     f"{', '.join(unranked['run_id'].to_list())}; see below the leaderboard.")
    return lines


def method_notes(a: Analyses, samples: int, seed: int) -> list[str]:
    notes = [
        "Scores: each case's rubric score (points rubric, or weighted F1 on the two safety benchmarks) averaged over "
        "the selected judge passes; a run's overall score is the macro mean of its benchmark means.",
        f"Two kinds of interval for a run's score appear, and they differ on purpose. The reproducibility "
        f"table's \"reference interval (summary)\" is the reference runner's percentile bootstrap reproduced bit for "
        f"bit (`bedside summary`: its Mersenne-Twister draws per benchmark, {samples} samples, seed {seed}, dataset "
        "order for collected runs and completion order for imported ones): the number a published BedsideBench "
        "result shows. The leaderboard and benchmark intervals, the \"paired interval (compare)\", are a "
        "stratified t over the run's own case scores, clipped to [0, 1] (`bedside compare`, the estimator of the "
        "pairwise differences): it keeps 95% coverage with few cases per benchmark, where the percentile "
        "bootstrap under-covers, so the two differ by more than resampling noise. Both cover case sampling only, "
        "not answer or judge variance.",
        "Pairwise differences are paired on the cases both runs completed: a Student-t test on the case "
        "differences, stratified by benchmark (Welch-Satterthwaite degrees of freedom), whose interval and p-value "
        "come from the same t, so the 95% interval excludes 0 exactly when p < 0.05. Holm (family-wise error) and "
        "Benjamini-Hochberg (false discovery rate) adjust within the family a row belongs to: every pair of ranked "
        "runs, or each run against the baseline; per-benchmark rows form families of their own, so showing them "
        "never changes an overall row's adjusted p. \"Cannot be "
        "told apart\" means the Holm-adjusted p is 0.05 or more; it is not evidence that the runs are equal.",
        "Detectable (80% power): the smallest true difference a two-sided 5% test on these common cases would "
        "detect with 80% probability, taking the observed standard error as the true one; a smaller difference "
        "can go unseen.",
        f"Rank intervals: each run's rank in every one of {samples} benchmark-stratified resamples (numpy's seeded "
        f"generator, seed {seed}, drawn once and shared by the ranked runs; ties share the better rank); the "
        "2.5-97.5% range and the share of resamples where it ranks first.",
    ]
    if a.items is not None:
        notes.append("Rubric items: rate = mean over runs of the share of judge passes that matched the item; "
                     "discrimination = correlation across runs between matching the item and the run's overall "
                     "score (needs 3 runs).")
    if a.harm is not None:
        pooled = a.harm.filter(pl.col("scope") == BOTH)
        size = "denominator" if "denominator" in pooled.columns else "n_cases"
        counts = {m: int(v) for m, v in pooled.group_by("metric").agg(pl.col(size).max()).iter_rows()}
        both = counts.get("f1", 0)
        omit, commit = counts.get("severe_omission_case_rate", both), counts.get("severe_commission_case_rate", both)
        notes.append(
            "Harms (safety benchmarks only): a severe omission is a missed +3 item, a severe commission an endorsed "
            f"-3 item. Their case rates are over the cases that can have the event: {omit} of the {both} safety "
            f"cases have a +3 item and {commit} a -3 item (most per run); \"either\" is the protocol's severe rate "
            "over every safety case. Precision and recall are weighted by severity class.")
    return notes


def warnings(a: Analyses) -> list[str]:
    out = list(a.cmp.notes)
    for row in a.cmp.excluded.iter_rows(named=True):
        out.append(f"run {row['run_id']} left out: {row['reason']}")
    board = a.cmp.leaderboard
    for r in board.filter((pl.col("failed") > 0) | (pl.col("not_attempted") > 0)).iter_rows(named=True):
        out.append(f"run {r['run_id']}: {r['failed']} failed and {r['not_attempted']} not-attempted case(s); its "
                   f"scores cover the {r['completed']} completed cases only")
    judges = board["judge_model"].unique().to_list()
    if len(judges) > 1:
        out.append(f"runs were scored by different judges ({', '.join(str(j) for j in judges)}): score differences "
                   "mix answer quality with judge strictness")
    for section, why in a.absent.items():
        if section != "judges":
            out.append(f"{section}: nothing to show ({why})")
    if a.agreement is not None:
        out += a.agreement.notes
    return list(dict.fromkeys(out))
