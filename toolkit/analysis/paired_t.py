"""Paired differences: standard error, Student-t p-value, interval and detectable difference, all from one t.

For one row (a pair of runs, overall or in one benchmark) the case differences
``d = score_a - score_b`` on the common cases of benchmark b (m_b of them) have
mean ``dbar_b`` and unbiased variance ``s_b^2``. The row's difference is the
macro mean over the B benchmarks with a common case, ``delta = sum_b dbar_b / B``;
benchmarks are independent samples of cases, so

    SE = sqrt(sum_b v_b) / B,   v_b = s_b^2 / m_b,
    df = (sum_b v_b)^2 / sum_b (v_b^2 / (m_b - 1))      (Welch-Satterthwaite),
    p = 2 P(T_df > |delta| / SE),   interval = delta -/+ t(0.975, df) SE.

One benchmark gives df = m - 1: the row is exactly the paired t-test
(``scipy.stats.ttest_rel``, checked in tests/test_stats_crosscheck.py). The p-value
and the interval are read on the same t distribution with the same SE, so the
interval excludes 0 exactly when p < 0.05.

Why not the bootstrap distribution: the resampled mean of m cases has the plug-in
variance (divisor m) and is read on normal tails. At 25 cases per benchmark, the
real size, that rejected ~6.2% of true nulls per benchmark row at 5% and Holm
families of a pair's 11 rows (10 benchmarks + overall) ~8-10%. Under the null of
two equally good runs graded on the same cases, case differences are symmetric
about 0, where the t reference holds even for the coarse, tied, mostly 0/1
scores of rubric grading (tests/test_analysis_calibration.py measures the
false-positive rates at 25 cases per benchmark).

``mdd80`` is the smallest true difference a two-sided 5% test on these cases
detects with 80% power, ``(t(0.975, df) + t(0.80, df)) SE``, taking the observed
SE as the true one (the usual planning approximation): a difference smaller
than it may well go unseen, so "not significant" is not "equal".

The same estimator gives a run's own interval: applied to one run's case scores
instead of differences, delta is its macro mean and the interval a stratified t
interval of it (``compare``'s leaderboard and benchmark rows).

Where no interval can be estimated it is NaN and ``ci_note`` says why (never a
point range labelled 95%). Fewer than 2 cases: everything but delta is NaN. A
benchmark with a single case has no variance to estimate, so a row with one
(while others vary) has no interval, SE or p. When no benchmark's differences
vary (beyond TIE) there is no spread to estimate: no interval; p = 1 when delta
is 0, else an exact sign test on the case differences (ties dropped), which is
bounded away from 0 for few cases so Holm and BH do not turn a couple of cases
into a certainty; df and mdd80 are NaN.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from toolkit import _process
from toolkit.analysis.paired import TIE
from toolkit.protocol import CI_HIGH

POWER = 0.80  # the power mdd80 is stated at
LEVEL = round(2 * (1 - CI_HIGH), 12)  # two-sided test level matching the 95% interval: 0.05


@dataclass(frozen=True, eq=False)
class PairedT:
    """Per row of the input: the statistic's parts, each a (k,) float array (NaN where undefined)."""

    delta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    mdd80: np.ndarray
    ci_note: list[str | None]  # why a row has no interval (None where it has one)


def paired_t(differences: np.ndarray, strata: Sequence[slice] | None = None) -> PairedT:
    """The stratified paired t of each row of (k, N) case differences (NaN = not a common case).

    ``strata`` are column slices (benchmarks), default one stratum of every column; see the module doc.
    """
    d = np.asarray(differences, dtype=np.float64)
    strata = list(strata) if strata is not None else [slice(0, d.shape[1])]
    k = d.shape[0]
    means, variance, df_den = np.zeros(k), np.zeros(k), np.zeros(k)
    used, single = np.zeros(k), np.zeros(k)  # benchmarks with a common case; those with exactly one
    varying, single_df = np.zeros(k), np.zeros(k)  # benchmarks whose differences vary; sum of their m - 1
    flat = np.ones(k, dtype=bool)
    n = (~np.isnan(d)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # strata without a common case: NaN by design
        for s in strata:
            part = d[:, s]
            m = (~np.isnan(part)).sum(axis=1).astype(np.float64)
            mean = np.nansum(part, axis=1) / m
            squares = np.nansum((part - mean[:, None]) ** 2, axis=1)
            v = np.where(m >= 2, squares / (m * (m - 1.0)), 0.0)  # s_b^2 / m_b
            means += np.where(m >= 1, mean, 0.0)
            used += m >= 1
            single += m == 1
            variance += v
            df_den += np.where(m >= 2, v ** 2 / (m - 1.0), 0.0)
            varying += v > 0
            single_df += np.where(v > 0, m - 1.0, 0.0)
            spread = np.nanmax(part, axis=1) - np.nanmin(part, axis=1) if part.shape[1] else np.zeros(k)
            flat &= ~(spread > TIE)
        delta = means / used
        se = np.sqrt(variance) / used
        # One benchmark with spread: exactly its m - 1 (the general formula rounds to 22.000000000000004).
        df = np.where(varying == 1, single_df, variance ** 2 / df_den)
    usable = (n >= 2) & (used >= 1)
    degenerate = usable & (flat | ~(se > 0))
    partial = usable & ~degenerate & (single > 0)  # a benchmark of one case: its variance is unknown
    regular = usable & ~degenerate & ~partial
    out = {name: np.full(k, np.nan) for name in ("se", "df", "p_value", "ci_low", "ci_high", "mdd80")}
    if regular.any():
        special = _process.student_t()  # here: a command that prints no pair never loads scipy

        r_df, r_se, r_delta = df[regular], se[regular], delta[regular]
        critical = special.stdtrit(r_df, CI_HIGH)
        out["se"][regular], out["df"][regular] = r_se, r_df
        out["p_value"][regular] = np.minimum(1.0, 2 * special.stdtr(r_df, -np.abs(r_delta) / r_se))
        out["ci_low"][regular] = r_delta - critical * r_se
        out["ci_high"][regular] = r_delta + critical * r_se
        out["mdd80"][regular] = (critical + special.stdtrit(r_df, POWER)) * r_se
    if degenerate.any():
        rows = np.flatnonzero(degenerate)
        moved = np.abs(delta[rows]) > TIE
        p = np.ones(rows.size)
        if moved.any():
            part = d[rows[moved]]
            p[moved] = sign_test_p((part > TIE).sum(axis=1), (part < -TIE).sum(axis=1))
        out["se"][rows] = 0.0
        out["p_value"][rows] = p
    notes: list[str | None] = [None] * k
    for i in np.flatnonzero(~regular).tolist():
        if n[i] == 0:
            notes[i] = "no case: no interval"
        elif n[i] == 1:
            notes[i] = "1 case: no interval"
        elif single[i] == used[i]:
            notes[i] = "1 case per benchmark: no interval"
        elif degenerate[i]:
            notes[i] = "no variation between cases: no interval"
        else:
            notes[i] = f"1 case in {int(single[i])} benchmark{'s' if single[i] > 1 else ''}: no interval"
    return PairedT(delta=delta, ci_note=notes, **out)


def sign_test_p(wins: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Exact two-sided sign test per row: min(1, 2 * P(Bin(n, 1/2) <= min(wins, losses))), n = wins + losses
    (1 when n = 0)."""
    out = np.ones(len(wins))
    for i, (w, l) in enumerate(zip(np.asarray(wins).tolist(), np.asarray(losses).tolist())):
        n, k = int(w) + int(l), min(int(w), int(l))
        if n:
            # Exact integer arithmetic: the tail of a large n would underflow as a float product.
            out[i] = min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2 ** n)
    return out
