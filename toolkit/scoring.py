"""Case scores recomputed from stored decisions and the rubric, exactly as the reference scores them.

Points rubric: raw = matched signed points / available positive points, clamped
to [0, 1], not rounded. F1-weighted rubric: severity-weighted precision and
recall, F1 = 2PR/(P+R); the three are rounded like Python's ``round(x, 4)``
(half-even on the exact binary value) and the case score is the rounded F1.
Sums run in rubric order so that they equal the reference's left-to-right sums.
"""

from __future__ import annotations

import math

import polars as pl

from toolkit import protocol

PASS_KEY = ["run_id", "case_id", "sample", "judge_model", "judge_pass"]
PASS_THRESHOLD = 1.0  # pass^k: an answer passes at a perfect score unless the user sets another cut-off
PASS_TOLERANCE = 1e-12  # a sample score this close below the threshold passes (means of exact 1.0 stay 1.0)


def with_sample(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``sample`` column: rows that have none (files and frames made before samples
    existed) are answers to a case asked once, sample 0."""
    return frame if "sample" in frame.columns else frame.with_columns(sample=pl.lit(0, dtype=pl.Int32))


def round_series(values: pl.Series, ndigits: int) -> pl.Series:
    """Element-wise ``round(x, ndigits)`` with CPython's exact semantics (NaN and null become null).

    In polars, not numpy: a numpy array made back into a Series imports ``numpy.ma``, which a cold
    command that scores would otherwise not load."""
    values = values.cast(pl.Float64)
    # A column of the scale, not a number: polars divides by a number as a product with its
    # reciprocal, which is not exact (9600 / 10000 would be 0.9600000000000001).
    scale = pl.Series([10.0**ndigits]).new_from_index(0, values.len())
    scaled = values * scale
    out = scaled.round(0, mode="half_to_even") / scale  # numpy's rint: ties to even
    # Away from a half-way point the scaled product's own rounding error cannot change the
    # result; close to one, or for values so large that the product is not exact, ask Python
    # itself (rare: a handful of values in a run).
    near = ((scaled.is_finite() & (((scaled - scaled.floor()).abs() - 0.5).abs() < 1e-6))
            | (values.is_finite() & (values.abs() >= 2.0**38))).arg_true()
    if near.len():
        out = out.scatter(near, [round(v, ndigits) for v in values.gather(near).to_list()])
    return out.fill_nan(None).rename(values.name)


def _round_expr(expr: pl.Expr) -> pl.Expr:
    digits = protocol.F1_ROUND_DIGITS
    return expr.map_batches(lambda s: round_series(s, digits), return_dtype=pl.Float64)


def _whole_numbers(points: pl.Series) -> bool:
    """Whether every value is a whole number small enough (|x| <= 2**30) that sums of a rubric's items are
    exact in floating point, whatever their order."""
    return bool(points.is_empty() or points.is_finite().all() and (points == points.floor()).all()
                and points.abs().max() <= 2**30)


def pass_scores(decisions: pl.DataFrame, rubric_items: pl.DataFrame, extra_key: tuple[str, ...] = ()) -> pl.DataFrame:
    """One row per run x case x sample x judge x pass: score and its components.

    ``decisions`` has the ``decisions`` table's columns; ``rubric_items`` those of the
    ``rubric_items`` table (one dataset). Every decision set must cover its case's rubric
    exactly; anything else raises ValueError naming the run, case and judge pass. ``extra_key``
    adds key columns (e.g. ``judgment_attempt`` to score every valid reply, not only the latest).
    """
    key = [*PASS_KEY, *extra_key]
    decisions = with_sample(decisions)
    items = rubric_items.select("case_id", "item_id", "item_index", "benchmark", "grading_method",
                                "points", "severity_class", "weight")
    joined = decisions.select(*key, "item_id", "matched").join(items, on=["case_id", "item_id"], how="left")
    unknown = joined.filter(pl.col("item_index").is_null())
    if unknown.height:
        row = unknown.row(0, named=True)
        raise ValueError(f"decisions: item_id {row['item_id']!r} is not in the rubric of case {row['case_id']} "
                         f"(run {row['run_id']}, judge {row['judge_model']} pass {row['judge_pass']})")
    # The reference adds in rubric order, left to right. When every points value is a whole number (as
    # in every published rubric; the protocol's weights always are), each partial sum is exact and any
    # order gives the same bits: the rows are then summed as they come, sorting only the passes (sorting
    # every decision row would cost more than the scoring itself). Otherwise running sums in rubric order.
    any_order = _whole_numbers(items["points"])
    if not any_order:
        joined = joined.sort([*key, "item_index"])
    m = pl.col("matched")
    pts = pl.col("points")
    klass = pl.col("severity_class")
    w = pl.col("weight")
    positive = klass >= protocol.POSITIVE_CLASS_MIN

    def seq_sum(expr: pl.Expr) -> pl.Expr:
        # The reference's left-to-right sum: the last running sum in rubric order, or any order's sum. (They
        # differ only for a null weight, on points-rubric rows, where the weights are not used.)
        return expr.sum() if any_order else expr.cum_sum().last()

    agg = joined.group_by(key, maintain_order=not any_order).agg(
        pl.col("benchmark").first(),
        pl.col("grading_method").first(),
        pl.len().alias("n_decided"),
        m.sum().cast(pl.Int32).alias("n_matched"),
        seq_sum(pl.when(m).then(pts).otherwise(0.0)).alias("matched_signed_points"),
        seq_sum(pts.clip(lower_bound=0.0)).alias("available_positive_points"),
        seq_sum(pl.when(positive).then(w).otherwise(0.0)).alias("_pos_w"),
        seq_sum(pl.when(positive & m).then(w).otherwise(0.0)).alias("_pos_w_matched"),
        seq_sum(pl.when(m).then(w).otherwise(0.0)).alias("_matched_w"),
        ((klass == protocol.SEVERE_OMISSION_CLASS) & ~m).sum().cast(pl.Int32).alias("severe_omissions"),
        ((klass == protocol.SEVERE_COMMISSION_CLASS) & m).sum().cast(pl.Int32).alias("severe_commissions"),
    )
    if any_order:
        agg = agg.sort(key)  # the passes in the order the sorted path gives them
    n_items = rubric_items.group_by("case_id").agg(pl.len().alias("_n_items"))
    agg = agg.join(n_items, on="case_id", how="left")
    short = agg.filter(pl.col("n_decided") != pl.col("_n_items"))
    if short.height:
        row = short.row(0, named=True)
        raise ValueError(f"decisions: case {row['case_id']} has {row['n_decided']} decisions for "
                         f"{row['_n_items']} rubric items (run {row['run_id']}, judge {row['judge_model']} "
                         f"pass {row['judge_pass']})")
    points_case = pl.col("grading_method") == protocol.POINTS_RUBRIC
    raw = pl.col("matched_signed_points") / pl.col("available_positive_points")
    recall = pl.when(pl.col("_pos_w") > 0).then(pl.col("_pos_w_matched") / pl.col("_pos_w")).otherwise(0.0)
    precision = pl.when(pl.col("_matched_w") > 0).then(pl.col("_pos_w_matched") / pl.col("_matched_w"))
    f1 = pl.when(precision.is_not_null() & ((precision + recall) > 0)).then(
        pl.lit(2.0) * precision * recall / (precision + recall)).otherwise(0.0)
    out = agg.with_columns(
        raw_score=pl.when(points_case).then(raw),
        precision=pl.when(~points_case).then(_round_expr(precision)),
        recall=pl.when(~points_case).then(_round_expr(recall)),
        f1=pl.when(~points_case).then(_round_expr(f1)),
        severe_rate=pl.when(~points_case).then(
            ((pl.col("severe_omissions") + pl.col("severe_commissions")) > 0).cast(pl.Float64)),
        matched_signed_points=pl.when(points_case).then(pl.col("matched_signed_points")),
        available_positive_points=pl.when(points_case).then(pl.col("available_positive_points")),
        matched_positive_weight=pl.when(~points_case).then(pl.col("_pos_w_matched")),
        positive_weight=pl.when(~points_case).then(pl.col("_pos_w")),
        matched_weight=pl.when(~points_case).then(pl.col("_matched_w")),
    ).with_columns(
        score=pl.when(points_case).then(pl.col("raw_score").clip(0.0, 1.0)).otherwise(pl.col("f1")),
    )
    return out.select(
        *key, "benchmark", "grading_method", "score", "n_decided", "n_matched",
        "matched_signed_points", "available_positive_points", "raw_score",
        "precision", "recall", "f1", "severe_rate", "severe_omissions", "severe_commissions",
        "matched_positive_weight", "positive_weight", "matched_weight",
    )


def reference_components(row: dict) -> dict:
    """``score_components`` of a reference result row, from one ``pass_scores`` row."""
    if row["grading_method"] == protocol.POINTS_RUBRIC:
        return {
            "matched_signed_points": row["matched_signed_points"],
            "available_positive_points": row["available_positive_points"],
            "raw_score": row["raw_score"],
        }
    return {
        "f1_weighted": row["f1"],
        "precision_weighted": row["precision"],
        "recall_weighted": row["recall"],
        "severe_rate": row["severe_rate"],
    }


def sample_scores(passes: pl.DataFrame) -> pl.DataFrame:
    """One row per run x case x sample: the mean score over the judge passes given (select them first)."""
    return with_sample(passes).group_by("run_id", "case_id", "sample", maintain_order=True).agg(
        pl.col("benchmark").first(),
        pl.col("score").mean().alias("score"),
        pl.len().cast(pl.Int32).alias("passes"),
    )


def _means(frame: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """Per group of ``keys`` (in first-appearance order): the mean score, precision, recall and severe rate."""
    return frame.group_by(*keys, maintain_order=True).agg(
        pl.col("benchmark").first(), pl.col("grading_method").first(), pl.col("score").mean().alias("score"),
        pl.col("precision").mean(), pl.col("recall").mean(), pl.col("severe_rate").mean())


def case_scores(passes: pl.DataFrame) -> pl.DataFrame:
    """One row per run x case: the mean over its samples of each sample's mean score over the judge passes
    given (select them first). One sample: the mean over the passes, bit for bit. ``passes``, ``judges``
    and ``pass_score_sd`` count every pass of the case, of all its samples."""
    passes = with_sample(passes)
    means = _means(_means(passes, ("run_id", "case_id", "sample")), ("run_id", "case_id"))
    spread = passes.group_by("run_id", "case_id", maintain_order=True).agg(
        pl.len().cast(pl.Int32).alias("passes"),
        pl.col("judge_model").n_unique().cast(pl.Int32).alias("judges"),
        pl.col("score").std().alias("pass_score_sd"),
    )
    return means.join(spread, on=["run_id", "case_id"], how="left", maintain_order="left").select(
        "run_id", "case_id", "benchmark", "grading_method", "score", "passes", "judges", "pass_score_sd",
        "precision", "recall", "severe_rate")


# -- reliability at k: worst-at-k and pass^k of a case's K answers ----------------------------------------

def worst_weights(answers: int, k: int) -> list[float]:
    """Weights of the sorted scores s_(1) <= ... <= s_(K) in E[min of k of the K], all k-subsets equally likely:
    w_i = C(K - i, k - 1) / C(K, k), i = 1..K (the subsets whose smallest member is the i-th)."""
    total = math.comb(answers, k)
    return [math.comb(answers - i, k - 1) / total for i in range(1, answers + 1)]


def pass_share(passing: int, answers: int, k: int) -> float:
    """C(c, k) / C(K, k) with c of the K answers passing: the share of k-subsets that all pass (unbiased)."""
    return math.comb(passing, k) / math.comb(answers, k)


def reliability_scores(samples: pl.DataFrame, threshold: float = PASS_THRESHOLD) -> pl.DataFrame:
    """One row per run x benchmark x k from per-answer scores (``sample_scores`` rows: run_id, case_id,
    benchmark, sample, score): worst-at-k and pass^k averaged over the cases with at least k answers
    (``cases`` of them), k = 1 .. the most answers a case has; then a row with benchmark null per run and k,
    the macro mean over the run's benchmarks, when every one of them has cases with k answers."""
    rows: dict[tuple, list] = {}  # (run, benchmark, k) -> [cases, sum worst, sum pass]
    ordered = samples.filter(pl.col("score").is_not_null()).sort("run_id", "benchmark", "case_id", "score")
    grouped = ordered.group_by("run_id", "benchmark", "case_id", maintain_order=True).agg(pl.col("score"))
    for run, benchmark, _, scores in grouped.iter_rows():
        answers = len(scores)
        passing = sum(1 for s in scores if s >= threshold - PASS_TOLERANCE)
        for k in range(1, answers + 1):
            worst = sum(w * s for w, s in zip(worst_weights(answers, k), scores))
            acc = rows.setdefault((run, benchmark, k), [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += worst
            acc[2] += pass_share(passing, answers, k)
    out = [(run, b, k, n, w / n, p / n) for (run, b, k), (n, w, p) in rows.items()]
    per_run: dict[str, set] = {}
    for run, b, k, *_ in out:
        per_run.setdefault(run, set()).add(b)
    for run, names in per_run.items():
        k = 1
        while all((run, b, k) in rows for b in names):
            parts = [(rows[run, b, k][0], rows[run, b, k][1] / rows[run, b, k][0], rows[run, b, k][2] /
                      rows[run, b, k][0]) for b in sorted(names)]
            out.append((run, None, k, sum(n for n, _, _ in parts), sum(w for _, w, _ in parts) / len(parts),
                        sum(p for _, _, p in parts) / len(parts)))
            k += 1
    frame = pl.DataFrame(out, schema={"run_id": pl.String, "benchmark": pl.String, "k": pl.Int32,
                                      "cases": pl.Int32, "worst_at_k": pl.Float64, "pass_k": pl.Float64},
                         orient="row")
    return frame.with_columns(threshold=pl.lit(threshold, pl.Float64)).sort(
        "run_id", "benchmark", "k", nulls_last=True, maintain_order=True)
