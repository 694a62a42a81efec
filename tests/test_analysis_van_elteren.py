"""van_elteren_p: scipy's signed-rank test for one stratum, a hand computation for two, NaN rules, rows
independent of each other. Its false-positive rate is measured in tests/test_calibration_coverage.py."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats

from toolkit.analysis.van_elteren import van_elteren_p


def _scipy_p(row: np.ndarray) -> float:
    row = row[~np.isnan(row)]
    return stats.wilcoxon(row, zero_method="pratt", method="approx", correction=False).pvalue


def test_one_stratum_is_scipys_signed_rank_test_with_zeros_and_ties() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for n in (3, 5, 10, 25, 50, 120):
        block = rng.integers(-4, 5, (40, n)) / 4  # rubric-like: zeros and tied |d| in nearly every row
        block[:, 0] = 0.75  # at least one non-zero difference
        rows += list(block)
        continuous = rng.normal(0.05, 0.3, (10, n)).clip(-1, 1).round(4)
        rows += list(continuous)
    for row in rows:
        assert van_elteren_p(row[None, :])[0] == pytest.approx(_scipy_p(row), rel=1e-12, abs=1e-15)


def test_absent_cases_are_left_out() -> None:
    rng = np.random.default_rng(4)
    d = rng.integers(-4, 5, (200, 30)) / 4
    d[rng.random(d.shape) < 0.2] = np.nan
    d[:, 0] = -0.5  # every row has a non-zero difference
    got = van_elteren_p(d)
    assert got == pytest.approx([_scipy_p(row) for row in d], rel=1e-12, abs=1e-15)


def test_two_strata_with_ties_and_zeros_by_hand() -> None:
    # Stratum 1, n = 4: |d| = .25 .25 .5 0 -> ranks 2.5 2.5 4 (the zero takes rank 1 and is dropped),
    #   W = 2.5 - 2.5 + 4 = 4, Var = 2.5^2 + 2.5^2 + 4^2 = 28.5, w = 1/5.
    # Stratum 2, n = 5 common (one absent): |d| = .1 .1 .1 .3 .5 -> ranks 2 2 2 4 5,
    #   W = 2 + 2 + 2 - 4 + 5 = 7, Var = 3 * 2^2 + 4^2 + 5^2 = 53, w = 1/6.
    d = np.array([[0.25, -0.25, 0.5, 0.0, 0.1, 0.1, 0.1, -0.3, np.nan, 0.5]])
    z = (4 / 5 + 7 / 6) / math.sqrt(28.5 / 25 + 53 / 36)
    got = van_elteren_p(d, (slice(0, 4), slice(4, 10)))
    assert got[0] == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)
    # The weights matter: the pooled (one-stratum) test of the same differences is another number.
    assert van_elteren_p(d)[0] != pytest.approx(got[0], rel=1e-6)


def test_strata_order_and_layout_do_not_matter() -> None:
    rng = np.random.default_rng(5)
    d = rng.integers(-4, 5, (50, 30)) / 4
    d[rng.random(d.shape) < 0.1] = np.nan
    strata = (slice(0, 7), slice(7, 20), slice(20, 30))
    swapped = np.concatenate([d[:, 20:30], d[:, 0:7], d[:, 7:20]], axis=1)
    assert van_elteren_p(swapped, (slice(10, 17), slice(17, 30), slice(0, 10))) == \
        pytest.approx(van_elteren_p(d, strata), rel=1e-12)


def test_zero_rows_are_nan_and_zero_strata_add_nothing() -> None:
    d = np.array([
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [1e-13, -1e-13, 0.0, np.nan, 0.0, 0.0],  # within TIE of 0: zeros
        [np.nan] * 6,
        [0.0, 0.0, 0.0, 0.5, -0.25, 0.75],  # stratum 1 all zero
        [np.nan, np.nan, np.nan, 0.5, -0.25, 0.75],  # stratum 1 absent
    ])
    p = van_elteren_p(d, (slice(0, 3), slice(3, 6)))
    assert np.isnan(p[:3]).all()
    alone = van_elteren_p(d[3:4, 3:6])[0]
    assert p[3] == pytest.approx(alone, rel=1e-12) and p[4] == pytest.approx(alone, rel=1e-12)
    assert van_elteren_p(np.zeros((2, 0))).shape == (2,)


def test_float_noise_does_not_break_a_tie() -> None:
    noisy = np.array([[1.0 - 0.7, 0.7 - 0.4, -0.3, 0.5]])  # 0.30000000000000004, 0.29999999999999993
    assert van_elteren_p(noisy)[0] == pytest.approx(_scipy_p(np.array([0.3, 0.3, -0.3, 0.5])), rel=1e-12)


def test_differences_beyond_one_are_refused() -> None:
    with pytest.raises(ValueError, match="scores in \\[0, 1\\]"):
        van_elteren_p(np.array([[0.5, 1.5]]))


def test_rows_are_independent_and_fast() -> None:
    rng = np.random.default_rng(6)
    strata = tuple(slice(50 * b, 50 * (b + 1)) for b in range(10))
    d = rng.integers(-4, 5, (300, 500)) / 4
    d[rng.random(d.shape) < 0.05] = np.nan
    d[7] = 0.0
    start = time.perf_counter()
    together = van_elteren_p(d, strata)
    elapsed = time.perf_counter() - start
    alone = np.array([van_elteren_p(row[None, :], strata)[0] for row in d])
    assert np.array_equal(np.isnan(together), np.isnan(alone)) and np.isnan(together[7])
    assert together == pytest.approx(alone, rel=1e-12, nan_ok=True)
    assert elapsed < 1.0, f"300 pairs x 500 cases took {elapsed:.2f} s"


def test_it_tests_symmetry_within_benchmarks_not_the_macro_mean() -> None:
    """Four benchmarks of 50, 25, 10 and 3 cases, rubric-like differences (steps of 1/8, sd 0.25), 4,000
    replicates (standard error of a 5% rate 0.35%). At its own null (every benchmark's differences symmetric
    about 0) it rejects 5.7% (seed 1); with per-benchmark shifts +0.06, 0, -0.02, -0.04 (macro difference 0,
    case-weighted +0.03) it rejects 17.9%: it is not a test of the macro mean, and the printed note and
    docs/methods.md say what it tests."""
    from toolkit.analysis.pairs import METHOD_NOTE

    rng = np.random.default_rng(1)
    sizes, replicates = (50, 25, 10, 3), 4000
    edges = np.cumsum((0, *sizes))
    strata = [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]

    def rejected(shifts: tuple[float, ...]) -> float:
        d = np.concatenate([np.round(np.clip(rng.normal(s, 0.25, (replicates, n)), -1, 1) * 8) / 8
                            for s, n in zip(shifts, sizes)], axis=1)
        return float(np.mean(van_elteren_p(d, strata) < 0.05))

    shifts = (0.06, 0.0, -0.02, -0.04)
    assert sum(shifts) == pytest.approx(0.0, abs=1e-15)
    assert rejected((0.0,) * 4) <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / replicates)
    assert rejected(shifts) > 0.12
    words = " ".join(METHOD_NOTE.split())
    assert "not the macro mean" in words
