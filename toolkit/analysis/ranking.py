"""Who is ranked, competition ranks, rank intervals over shared resamples, tie groups and separability.

Ranking is like for like: a unit is ranked only when it has at least ``MIN_CASES``
cases in every benchmark of the comparison: the benchmarks of the runs' dataset (for
raters, those of the matrix), so whether a unit is ranked depends on it alone. A macro mean over 2 of 10 benchmarks, or over single cases,
is not the same quantity as a complete run's, and one case in a benchmark has no spread for a
rank interval to reflect.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.protocol import CI_HIGH, CI_LOW

MIN_CASES = 2  # cases a ranked unit has in every benchmark: one case has no spread to estimate
SEPARATED = 0.05  # Holm-adjusted p (all-pairs family) below which two units are told apart


def ranking_gate(counts: np.ndarray, min_cases: int = MIN_CASES, benchmarks: int | None = None
                 ) -> tuple[np.ndarray, list[str | None]]:
    """(units,) ranked mask from (units, benchmarks) case counts, and per unit why it is not ranked;
    ``benchmarks``: how many a unit must cover (default: the columns of ``counts``)."""
    total = max(counts.shape[1], benchmarks or 0)
    covered = (counts > 0).sum(axis=1)
    thin = ((counts > 0) & (counts < min_cases)).sum(axis=1)
    reasons: list[str | None] = []
    for c, t in zip(covered.tolist(), thin.tolist()):
        why = [f"covers {c} of {total} benchmarks"] if c < total else []
        if t:
            cases = "1 case" if min_cases == 2 else f"fewer than {min_cases} cases"
            why.append(f"{cases} in {t} benchmark{'s' if t > 1 else ''}")
        reasons.append("; ".join(why) or None)
    return np.array([r is None for r in reasons], dtype=bool), reasons


def competition_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest; ties share the best rank ("1224"); NaN ranks last (tied)."""
    keys = -np.nan_to_num(np.asarray(values, dtype=np.float64), nan=-np.inf)
    order = np.argsort(keys, axis=-1, kind="stable")
    ordered = np.take_along_axis(keys, order, axis=-1)
    position = np.broadcast_to(np.arange(keys.shape[-1]), keys.shape)
    starts = np.ones(keys.shape, dtype=bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    # Each value's rank is 1 + the position where its run of equal values starts.
    placed = np.maximum.accumulate(np.where(starts, position, 0), axis=-1) + 1
    ranks = np.empty(keys.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, placed, axis=-1)
    return ranks


def rank_intervals(units: tuple[str, ...] | list[str], observed: np.ndarray, boot: np.ndarray) -> pl.DataFrame:
    """Each unit's rank over the resamples: median, 2.5-97.5% interval and share of resamples ranked first.

    ``boot`` is (units, samples) of resampled overall means from shared resamples, so a resample
    ranks every unit on the same cases. Resamples where some unit has no value are left out rather than
    ranking that unit last; ``resamples`` says how many were used (``compare``'s resamples have no such
    resample: a run with part of a benchmark draws its own cases there, ``rank_resamples``).
    """
    usable = boot[:, ~np.isnan(boot).any(axis=0)].T  # (samples, units)
    ranks = competition_ranks(usable).T
    if usable.shape[0]:
        lo, hi = np.percentile(ranks, [100 * CI_LOW, 100 * CI_HIGH], axis=1, method="inverted_cdf")
        median, first = np.median(ranks, axis=1), (ranks == 1).mean(axis=1)
    else:
        lo = hi = median = first = np.full(len(units), np.nan)
    return pl.DataFrame({
        "unit": list(units), "rank": competition_ranks(observed).astype(np.int64),
        "rank_median": median, "rank_low": lo, "rank_high": hi, "share_first": first,
        "resamples": np.full(len(units), usable.shape[0], dtype=np.int64),
    }, schema_overrides={"unit": pl.String, "rank_median": pl.Float64, "rank_low": pl.Float64,
                         "rank_high": pl.Float64, "share_first": pl.Float64}).with_columns(
        pl.col("rank_low", "rank_high").fill_nan(None).cast(pl.Int64))  # ranks are whole numbers (none: null)


def tie_groups(order: list[str], holm: dict[tuple[str, str], float | None]) -> list[int]:
    """Tie group (1 = top) of each unit of ``order`` (leaderboard order, best first).

    Walking down the leaderboard, a unit joins the current group unless the Holm-adjusted p of the
    overall pair (the group's first unit, this unit), over the family of all pairs, is below 0.05; then
    it starts the next group. A pair without a p (no common case, nothing to test) does not separate.
    ``holm`` maps (better, worse) to that p; the groups never depend on a baseline. The partition is greedy:
    a unit is compared with its group's first unit only, so units of neighbouring groups may not be told
    apart, and two units of one group may be (two close checkpoints below a noisier leader).
    """
    groups: list[int] = []
    head = ""
    for unit in order:
        p = holm.get((head, unit))
        if not groups:
            groups.append(1)
            head = unit
        elif p is not None and p < SEPARATED:
            groups.append(groups[-1] + 1)
            head = unit
        else:
            groups.append(groups[-1])
    return groups


def separability(order: list[str], holm: dict[tuple[str, str], float | None]) -> tuple[float | None, pl.DataFrame]:
    """Share of adjacent pairs (leaderboard order) with Holm-adjusted p < 0.05 over all pairs, and a
    one-row frame saying it with its counts (None and 0 adjacent pairs with fewer than two units)."""
    adjacent = list(zip(order, order[1:]))
    split = sum(1 for pair in adjacent if (p := holm.get(pair)) is not None and p < SEPARATED)
    share = split / len(adjacent) if adjacent else None
    text = (f"{split} of {len(adjacent)} adjacent pairs separated (Holm-adjusted p < 0.05 over all pairs)"
            if adjacent else "fewer than two ranked runs: nothing to separate")
    frame = pl.DataFrame({"separated": [split], "adjacent_pairs": [len(adjacent)], "share": [share], "note": [text]},
                         schema={"separated": pl.Int64, "adjacent_pairs": pl.Int64, "share": pl.Float64,
                                 "note": pl.String})
    return share, frame
