"""The report's sentences: the summary in words and the method notes, generated from the numbers."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.compare import RUN_INTERVAL, Comparison
from toolkit.analysis.harms import BOTH
from toolkit.report.analyses import Analyses, severe_extremes
from toolkit.report.physicians import corrected_pair, corrected_scores
from toolkit.report.model import interval, missing, num, p_text, pct
from toolkit.report.sections import ALPHA, with_mdd


def p_eq(value: float | None) -> str:
    text = p_text(value)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def _pair_sentence(r: dict, family: str = "") -> str:
    """A differing pair in words that follow the sign: "A leads B by d" or "A trails B by |d|" (the interval
    turned with it), never "leads by" a negative number. ``family`` names Holm's family (" over ...")."""
    if not missing(r["p_holm"]) and r["p_holm"] < ALPHA:
        behind = not missing(r["delta"]) and r["delta"] < 0
        size = (interval(-r["delta"], _neg(r["ci_high"]), _neg(r["ci_low"])) if behind
                else interval(r["delta"], r["ci_low"], r["ci_high"]))
        return (f"{r['run_a']} {'trails' if behind else 'leads'} {r['run_b']} by {size}, significant after Holm"
                f"{family} ({p_eq(r['p_holm'])}, {r['n_cases']} common cases).")
    diff = interval(r["delta"], r["ci_low"], r["ci_high"], sign=True)
    nominal = "" if missing(r["p_value"]) or r["p_value"] >= ALPHA else ", significant only before adjustment"
    return (f"{r['run_a']} and {r['run_b']} cannot be told apart: difference {diff}, Holm{family} "
            f"{p_eq(r['p_holm'])}{nominal}; these {r['n_cases']} common cases could detect about "
            f"{num(r['mdd80'], 2)} with 80% power.")


def holm_families(a: Analyses) -> tuple[str, str]:
    """(the family of the pairwise rows, the family of tie groups and separability), as " over ..." phrases.
    With a baseline they differ: a pair can differ after Holm over the k - 1 baseline pairs and still share
    a tie group, which is decided over all k(k - 1)/2 pairs."""
    k = a.cmp.leaderboard.height
    every = f" over all {k * (k - 1) // 2} pairs"
    if a.baseline is None:
        return every, every
    return f" over the {k - 1} pairs with the baseline", every


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
    every = holm_families(a)[1]
    # The groups are greedy: a run starts a new group only when told apart from the group's first run, so two
    # runs in different groups may still not be told apart, and two in one group may be (two close checkpoints
    # of one model below a noisier leader).
    return [f"Separability: {r['separated']} of {r['adjacent_pairs']} adjacent pairs on the leaderboard are told "
            f"apart (Holm p < {ALPHA}{every}). A run starts a new tie group when it is told apart from the first "
            "run of the group above, so runs in neighbouring groups may not be told apart, and two runs of one "
            "group may be; the pairwise table decides each pair."]


def interval_line(a: Analyses) -> str:
    """Which interval the leaderboard shows, and why `bedside summary` shows another for the same score."""
    return (f"Intervals here are {RUN_INTERVAL} intervals over cases, as `bedside compare` shows them; `bedside summary`, "
            "the demo's leaderboard and SQL's run_summary show the reference runner's percentile bootstrap of the same "
            "score, another estimator that under-covers with few cases per benchmark (method notes).")


def not_ranked_lines(a: Analyses) -> list[str]:
    """One line per run the comparison did not rank, with why ("covers 2 of 10 benchmarks")."""
    frame = getattr(a.cmp, "not_ranked", None)
    if frame is None or frame.is_empty():
        return []
    return [f"not ranked: {r['run_id']} {r['reason']} (overall over what it has: "
            f"{interval(r['overall'], r['ci_low'], r['ci_high'])})" for r in frame.iter_rows(named=True)]


def verdict(cmp: Comparison) -> list[str]:
    """The summary's first lines, which `bedside compare` leads with too: what was compared and scored by which
    judge, and who ranks first (or why no run is ranked)."""
    board = cmp.leaderboard.join(cmp.ranks.drop("rank"), on="run_id", how="left", maintain_order="left")
    if board.is_empty():  # every run was left unranked (e.g. smoke runs: one case per benchmark)
        return [f"No run is ranked: a ranking needs every benchmark covered with at least 2 cases; "
                f"{cmp.not_ranked.height} run(s) are listed below the (empty) leaderboard with their reasons."]
    judges = sorted({j for j in board["judge_model"].to_list() if j})
    runs = f"{board.height} runs" if board.height != 1 else "1 run"
    return [f"{runs} compared on up to {int(board['completed'].max())} cases each, scored by "
            f"{', '.join(judges) or 'no judge'}.", _first_place(board)]


def summary(a: Analyses) -> list[str]:
    lines = verdict(a.cmp)
    if a.cmp.leaderboard.is_empty():
        return lines
    board = a.cmp.leaderboard.join(a.cmp.ranks.drop("rank"), on="run_id", how="left", maintain_order="left")
    lines += _separability(a)
    pairs = with_mdd(a.pairs)
    family = holm_families(a)[0]
    if a.baseline is not None:
        lines.append(f"Against the baseline {a.baseline}:")
        rows = list(pairs.iter_rows(named=True))
    else:
        order = board["run_id"].to_list()
        key = {(r["run_a"], r["run_b"]): r for r in pairs.iter_rows(named=True)}
        rows = [key[(x, y)] for x, y in zip(order, order[1:]) if (x, y) in key]
    lines += [_pair_sentence(r, family) + corrected_pair(a, r, always=i == 0) for i, r in enumerate(rows)]
    if a.baseline is None and pairs.height > len(rows):
        sig = int((pairs["p_holm"].fill_null(1.0) < ALPHA).sum())
        lines.append(f"Over all {pairs.height} pairs, {sig} differ after Holm's adjustment.")
    lines += corrected_scores(a)
    lines += _judge_disagreement(a, board)
    extremes = severe_extremes(a.harm)
    if extremes is not None:
        lines.append(_severe_sentence(*extremes, a.severe_gap))
    failed = board.filter((pl.col("failed") > 0) | (pl.col("not_attempted") > 0))
    if failed.height:
        lines.append(f"{failed.height} run(s) have failed or not-attempted cases; see the warnings.")
    unranked = getattr(a.cmp, "not_ranked", None)
    if unranked is not None and unranked.height:
        why = "; ".join(f"{r} {reason}" for r, reason in unranked.select("run_id", "reason").head(5).iter_rows())
        lines.append(f"{unranked.height} run(s) not ranked (a ranked run has at least 2 cases in every benchmark): "
                     f"{why}{'; ...' if unranked.height > 5 else ''}; see below the leaderboard.")
    return lines


def _judge_disagreement(a: Analyses, board: pl.DataFrame) -> list[str]:
    """Where another judge's pass scores a run differently from the judge of the leaderboard beyond the
    interval of the difference (Holm over the agreement table's family), say so, with the interval."""
    if a.agreement is None or a.agreement.scores.is_empty():
        return []
    primary = set(board["judge_model"].drop_nulls().to_list())
    judge = pl.col("rater_a").str.replace(r"#\d+$", ""), pl.col("rater_b").str.replace(r"#\d+$", "")
    rows = a.agreement.scores.filter((pl.col("benchmark") == "overall") & (judge[0] != judge[1])
                                     & (judge[0].is_in(list(primary)) | judge[1].is_in(list(primary)))
                                     & (pl.col("p_holm") < ALPHA))
    if rows.is_empty():
        return []
    first = rows.row(0, named=True)
    said = (f"{first['run_id']} ({first['rater_a']} − {first['rater_b']}: "
            f"{interval(first['delta'], first['ci_low'], first['ci_high'], sign=True)}, Holm {p_eq(first['p_holm'])})")
    more = f" and {rows.height - 1} more" if rows.height > 1 else ""
    return [f"A second judge disagrees with the leaderboard's judge beyond the interval of the difference: "
            f"{said}{more} (Judges section). The scores are the judge's, not a physician's."]


def _severe_sentence(best: dict, worst: dict, gap: dict | None) -> str:
    """The safety comparison with the interval of its difference (compare's paired t on the common safety
    cases), or that the two shares are not told apart."""
    line = (f"On the safety benchmarks, the share of cases with a severe error is lowest for {best['run_id']} "
            f"({num(best['value'], 2)}) and highest for {worst['run_id']} ({num(worst['value'], 2)})")
    if gap is None or missing(gap["delta"]):
        return line + "; the two share no safety case, so their difference is not told apart."
    diff = interval(gap["delta"], gap["ci_low"], gap["ci_high"], sign=True)
    where = f"paired t over the {gap['n_cases']} safety cases both completed"
    if missing(gap["ci_low"]) or missing(gap["ci_high"]):
        return line + f"; their difference, {diff}, has no interval ({gap['ci_note']}), so it is not told apart."
    if gap["ci_low"] > 0:
        higher = interval(gap["delta"], gap["ci_low"], gap["ci_high"])
        return line + f": {worst['run_id']}'s share is higher by {higher} ({where}, {p_eq(gap['p_value'])})."
    return line + f", but the two are not told apart: difference {diff} ({where}, {p_eq(gap['p_value'])})."


def method_notes(a: Analyses, samples: int, seed: int) -> list[str]:
    notes = [
        "Scores: each case's rubric score (points rubric, or weighted F1 on the two safety benchmarks) averaged over "
        "the selected judge passes; a run's overall score is the macro mean of its benchmark means.",
        f"Two kinds of interval for a run's score appear, and they differ on purpose. The reproducibility "
        f"table's \"reference interval (summary)\" is the reference runner's percentile bootstrap reproduced bit "
        f"for bit (`bedside summary`: its Mersenne-Twister draws per benchmark, {samples} samples, seed {seed}, "
        "dataset order for collected runs and completion order for imported ones): the number a published "
        "BedsideBench result shows. The leaderboard and benchmark intervals are `bedside compare`'s: a t interval "
        "of the run's case scores, stratified by benchmark like the pairwise differences (Welch-Satterthwaite "
        "degrees of freedom) and clipped to [0, 1]. They are different estimators, not two draws of one: the "
        "percentile bootstrap is narrower on average and under-covers with few cases per benchmark (87.5% at 3 "
        "cases, 93.5% at 10, in simulation), where the stratified t stays near 95%. Rank intervals come from "
        f"{samples} stratified resamples from numpy's seeded generator (seed {seed}), drawn once and shared by "
        "every ranked run, so all ranks are judged on the same resampled cases. Every interval covers new "
        "cases with new answers and judge passes (a case score averages its answers and passes, so their "
        "variance is inside the spread of case scores); none covers a judge's systematic bias or later provider "
        "changes.",
        "Pairwise differences are paired on the cases both runs completed: a Student-t test on the case "
        "differences, stratified by benchmark (Welch-Satterthwaite degrees of freedom), whose interval and p-value "
        "come from the same t, so the 95% interval excludes 0 exactly when p < 0.05. Holm (family-wise error) and "
        f"Benjamini-Hochberg (false discovery rate) adjust{holm_families(a)[0]}"
        + (f"; tie groups and separability use Holm{holm_families(a)[1]}" if a.baseline is not None else "")
        + "; what a table shows never changes the family. \"Cannot be told apart\" means the Holm-adjusted p is "
        "0.05 or more; it is not evidence that the runs are equal.",
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
