"""Rank intervals with a partial run (one that answered half the cases of every benchmark), before and after
``rank_resamples``: coverage of the true rank at 3, 10, 25 and 50 cases per benchmark, the figures
docs/methods.md quotes. ``python -m pytest -s tests/test_calibration_rank_partial.py`` prints them.

Four runs of skills 1, 0.98, 0.96, 0.94 (true macro means ~0.011 apart, as in test_calibration_methods.py);
the second answered the first max(2, ceil(m / 2)) cases of each benchmark (cases are exchangeable, so this
is missing completely at random). "union": today's shared draws over the union of cases, a resample that
drew none of the partial run's cases in some benchmark left out; "own": ``rank_resamples``, the partial run
drawing its own cases. 600 replicates, 1,000 resamples each; Monte Carlo SE of a coverage near 95 %: 0.9
points (1.5 near 85 %).

    cases per benchmark                     3       10      25      50
    resamples left out (union)            28.7%    1.2%    0.0%    0.0%
    lowest run coverage, union            82.8%   93.8%   97.3%   98.8%
    lowest run coverage, own              83.8%   93.3%   97.3%   99.2%
    partial run coverage, union           92.8%   97.7%   99.2%   99.2%
    partial run coverage, own             92.7%   97.3%   99.2%   99.2%
    all 4 covered at once, union          71.3%   87.3%   95.5%   97.2%
    all 4 covered at once, own            73.3%   86.8%   95.7%   97.3%

Without the partial run (tests/test_calibration_methods.py) the lowest coverage is 85.7 / 93.8 / 98.0 / 98.8 %.
"""

from __future__ import annotations

import numpy as np

from tests.analysis_sim import SIM_BENCHMARKS, difficulties, expected_scores, rubric_scores
from toolkit.analysis.case_comparison import rank_resamples, resample_units
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.ranking import rank_intervals

CASES = (3, 10, 25, 50)
REPLICATES, DRAWS = 600, 1_000
SKILLS = (1.0, 0.98, 0.96, 0.94)
PARTIAL = 1


def _coverage(boot: np.ndarray, observed: np.ndarray, true_rank: np.ndarray) -> np.ndarray:
    """(replicates, runs) whether each run's rank interval covers its true rank."""
    covered = np.empty(observed.shape, dtype=bool)
    for r in range(observed.shape[0]):
        ranks = rank_intervals([f"r{i}" for i in range(len(SKILLS))], observed[r], boot[r])
        covered[r] = (ranks["rank_low"].to_numpy() <= true_rank) & (true_rank <= ranks["rank_high"].to_numpy())
    return covered


def test_a_partial_run_leaves_no_resample_out_and_keeps_rank_coverage() -> None:
    truth = np.array([expected_scores(s).mean() for s in SKILLS])
    true_rank = np.argsort(np.argsort(-truth)) + 1
    units = len(SKILLS)
    table = {}
    for m in CASES:
        rng = np.random.default_rng(1100 + m)
        t = difficulties(rng, REPLICATES, m)
        scores = np.stack([rubric_scores(rng, s * t) for s in SKILLS], axis=1)  # (replicates, runs, benchmarks, m)
        present = np.ones((units, SIM_BENCHMARKS, m))
        present[PARTIAL, :, max(2, (m + 1) // 2):] = 0.0
        observed = (np.where(present > 0, scores, 0).sum(-1) / present.sum(-1)).mean(-1)  # (replicates, runs)
        # Every replicate's runs are rows of one matrix: the same draws serve all, as compare shares them.
        matrix = from_arrays(scores.reshape(REPLICATES * units, -1), {f"b{b}": m for b in range(SIM_BENCHMARKS)},
                             present=np.tile(present.reshape(units, -1), (REPLICATES, 1)))
        settings = ResampleSettings(DRAWS, 42)
        union = resample_units(matrix, matrix.resamples(settings), benchmarks=False).overall
        own = rank_resamples(matrix, settings)
        assert not np.isnan(own).any()
        before = _coverage(union.reshape(REPLICATES, units, DRAWS), observed, true_rank)
        after = _coverage(own.reshape(REPLICATES, units, DRAWS), observed, true_rank)
        table[m] = (float(np.isnan(union).any(axis=0).mean()), before, after)
    print(f"\n{'cases per benchmark':<38}" + "".join(f"{m:>8}" for m in CASES))
    print(f"{'resamples left out (union)':<38}" + "".join(f"{v[0]:8.1%}" for v in table.values()))
    for name, k in (("union", 1), ("own", 2)):
        print(f"{'lowest run coverage, ' + name:<38}" + "".join(f"{v[k].mean(0).min():8.1%}" for v in table.values()))
        print(f"{'partial run coverage, ' + name:<38}" + "".join(f"{v[k].mean(0)[PARTIAL]:8.1%}"
                                                                for v in table.values()))
        print(f"{'all 4 covered at once, ' + name:<38}" + "".join(f"{v[k].all(1).mean():8.1%}"
                                                                 for v in table.values()))
    assert table[3][0] > 0.2  # the union draws leave out more than a fifth of the resamples at 3 cases
    for m, (_, before, after) in table.items():
        se = np.sqrt(0.95 * 0.05 / REPLICATES)
        assert after.mean(0).min() >= before.mean(0).min() - 3 * se, f"own draws lose coverage at {m} cases"
        if m >= 10:
            assert after.mean(0).min() >= 0.92, f"rank interval coverage with a partial run at {m} cases"
