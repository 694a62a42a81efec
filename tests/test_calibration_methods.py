"""Calibration of Benjamini-Hochberg, rank intervals, Fleiss' kappa and Krippendorff's alpha at 3, 10, 25
and 50 cases per benchmark (the figures docs/methods.md quotes; the paired t, Holm, Wilcoxon and the
run intervals are in tests/test_calibration_coverage.py). Scores shaped like rubric scores, from the same
simulation (tests/analysis_sim.py); seeds fixed, so the figures are deterministic.
``python -m pytest -s tests/test_calibration_methods.py`` prints them.

Measured, cases per benchmark:

    figure                                                 3       10      25      50
    BH, 6 pairs of 4 runs (2 equal pairs): FDR             0.9%    1.7%    1.8%    1.9%
    BH, 6 pairs of 4 equal runs: FWER                      1.7%    4.0%    4.2%    4.9%
    rank interval, 4 runs ~0.011 apart: coverage (lowest) 85.7%   93.8%   98.0%   98.8%
    rank interval: all 4 runs covered at once             76.3%   88.7%   95.8%   97.7%
    Fleiss kappa (3 raters, true 0.637): mean             0.633   0.636   0.637   0.636
    Fleiss kappa: within +/- 0.05 of the truth            67.1%   94.5%   99.9%   99.9%
    Krippendorff alpha (true 0.637): mean                 0.634   0.636   0.637   0.636
    Krippendorff alpha: within +/- 0.05 of the truth      67.3%   94.5%   99.9%   99.9%
    Fleiss kappa, raters guessing (true 0): 95% of runs  +/-0.09 +/-0.05 +/-0.03 +/-0.02

Rank intervals: 2.5-97.5% percentiles of each run's rank over a benchmark-stratified bootstrap (1,000
resamples here, 10,000 in ``compare``), the run's true rank from its exact expected macro mean (skills
1, 0.98, 0.96, 0.94: macro means 0.516, 0.505, 0.494, 0.483). Rank intervals are percentile intervals
of a discrete statistic: for runs this close they under-cover at 3 and 10 cases; with skills 1, 0.95,
0.9, 0.85 (means ~0.027 apart) the lowest run's coverage was 95.3% at 3 cases and 99-100% from 10 on.
Agreement: 5 rubric items per case, each matched with the case's probability t (the simulation's
difficulty), each rater errs on an item independently with probability 0.1, so the population kappa
is ((1-e)^2 + e^2 - P_e) / (1 - P_e) with P_e from the expected share of matches.
"""

from __future__ import annotations

import numpy as np

from toolkit.analysis.multiplicity import benjamini_hochberg
from toolkit.analysis.paired import ResampleSettings, draw_resamples
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.ranking import rank_intervals
from toolkit.analysis.reliability import category_counts, fleiss_kappa, krippendorff_alpha_nominal

from tests.analysis_sim import DIFFICULTY_ALPHA, DIFFICULTY_BETA, SIM_BENCHMARKS, difficulties, expected_scores, \
    rubric_scores

CASES = (3, 10, 25, 50)
CHECKED = (10, 25, 50)
LEVEL = 0.05
FAMILIES = 2_500
RANK_RUNS, RANK_DRAWS = 600, 1_000
RANK_SKILLS = (1.0, 0.98, 0.96, 0.94)
AGREEMENT_RUNS, ITEMS_PER_CASE, RATERS, ERROR = 1_000, 5, 3, 0.1


def _strata(cases: int) -> tuple[slice, ...]:
    return tuple(slice(b * cases, (b + 1) * cases) for b in range(SIM_BENCHMARKS))


def _runs(seed: int, replicates: int, cases: int, skills: tuple[float, ...]) -> np.ndarray:
    """(replicates, runs, benchmarks x cases) scores of runs graded on the same simulated cases."""
    rng = np.random.default_rng(seed)
    t = difficulties(rng, replicates, cases)
    return np.stack([rubric_scores(rng, skill * t).reshape(replicates, -1) for skill in skills], axis=1)


def _show(what: str, cells: dict[int, str]) -> None:
    print(f"\n{what:<52} " + "  ".join(f"{m:>2}: {cell}" for m, cell in cells.items()))


def _pair_p(runs: np.ndarray, cases: int) -> np.ndarray:
    """(families, pairs) paired-t p of every two runs of each family."""
    first, second = np.triu_indices(runs.shape[1], k=1)
    differences = (runs[:, first] - runs[:, second]).reshape(-1, runs.shape[-1])
    return paired_t(differences, _strata(cases)).p_value.reshape(runs.shape[0], first.size)


def test_benjamini_hochberg_keeps_the_false_discovery_rate() -> None:
    """Two runs of skill 1 and two of 0.85: of the 6 pairs, 2 are true nulls. FDR = E[false / rejected]."""
    null_pairs = np.array([0, 5])  # (0, 1) and (2, 3) in np.triu_indices order
    fdr, fwer = {}, {}
    for m in CASES:
        p = _pair_p(_runs(900 + m, FAMILIES, m, (1.0, 1.0, 0.85, 0.85)), m)
        rejected = np.stack([benjamini_hochberg(row) < LEVEL for row in p])
        false = rejected[:, null_pairs].sum(axis=1)
        fdr[m] = float(np.mean(false / np.maximum(rejected.sum(axis=1), 1)))
        p_null = _pair_p(_runs(950 + m, FAMILIES, m, (1.0,) * 4), m)
        fwer[m] = float(np.mean([np.nanmin(benjamini_hochberg(row), initial=1.0) < LEVEL for row in p_null]))
    _show("BH, 6 pairs of 4 runs (2 equal pairs): FDR", {m: f"{v:6.1%}" for m, v in fdr.items()})
    _show("BH, 6 pairs of 4 equal runs: FWER", {m: f"{v:6.1%}" for m, v in fwer.items()})
    slack = 3.5 * np.sqrt(LEVEL * (1 - LEVEL) / FAMILIES)
    for m in CHECKED:
        assert fdr[m] <= LEVEL + slack, f"BH FDR at {m} cases: {fdr[m]:.2%}"
        assert fwer[m] <= LEVEL + slack, f"BH FWER under the complete null at {m} cases: {fwer[m]:.2%}"


def test_rank_intervals_cover_the_true_ranks() -> None:
    truth = np.array([expected_scores(s).mean() for s in RANK_SKILLS])
    true_rank = np.argsort(np.argsort(-truth)) + 1
    units = [f"r{i}" for i in range(len(RANK_SKILLS))]
    lowest, joint = {}, {}
    for m in CASES:
        runs = _runs(1100 + m, RANK_RUNS, m, RANK_SKILLS)  # (replicates, units, cases)
        res = draw_resamples([(f"bench_{b}", m) for b in range(SIM_BENCHMARKS)], ResampleSettings(RANK_DRAWS, 42))
        flat = runs.reshape(-1, runs.shape[-1])
        boot = (sum(res.stratum_sums(flat, b) for b in range(SIM_BENCHMARKS)) / (m * SIM_BENCHMARKS)
                ).reshape(RANK_RUNS, len(units), -1)
        observed = runs.mean(axis=-1)
        covered = np.empty((RANK_RUNS, len(units)), dtype=bool)
        for r in range(RANK_RUNS):
            ranks = rank_intervals(units, observed[r], boot[r])
            covered[r] = (ranks["rank_low"].to_numpy() <= true_rank) & (true_rank <= ranks["rank_high"].to_numpy())
        lowest[m], joint[m] = float(covered.mean(axis=0).min()), float(covered.all(axis=1).mean())
    _show("rank interval, 4 runs ~0.011 apart: coverage (lowest)", {m: f"{v:6.1%}" for m, v in lowest.items()})
    _show("rank interval: all 4 runs covered at once", {m: f"{v:6.1%}" for m, v in joint.items()})
    for m in CHECKED:
        assert lowest[m] >= 0.92, f"rank interval coverage at {m} cases: {lowest[m]:.2%}"


def _agreement_counts(rng: np.random.Generator, cases: int, error: float) -> np.ndarray:
    """(items, 2) match / no-match counts of RATERS raters over one simulated run's rubric items."""
    t = difficulties(rng, 1, cases)[0]  # (benchmarks, cases): each case's chance that an item is matched
    truth = rng.random((SIM_BENCHMARKS, cases, ITEMS_PER_CASE)) < t[..., None]
    wrong = rng.random((*truth.shape, RATERS)) < error
    ratings = (truth[..., None] ^ wrong).reshape(-1, RATERS).astype(np.float64)
    return category_counts(ratings)[0]


def _population_kappa(error: float) -> float:
    share = float(np.mean(DIFFICULTY_ALPHA / (DIFFICULTY_ALPHA + DIFFICULTY_BETA)))  # E[t] over benchmarks
    matched = share * (1 - error) + (1 - share) * error
    observed, expected = (1 - error) ** 2 + error ** 2, matched ** 2 + (1 - matched) ** 2
    return (observed - expected) / (1 - expected)


def test_fleiss_kappa_and_krippendorff_alpha_are_close_to_the_population_value() -> None:
    truth = _population_kappa(ERROR)
    cells: dict[str, dict[int, str]] = {"kappa mean": {}, "kappa within": {}, "alpha mean": {}, "alpha within": {},
                                        "chance": {}}
    for m in CASES:
        rng = np.random.default_rng(1300 + m)
        kappa, alpha, chance = [], [], []
        for _ in range(AGREEMENT_RUNS):
            counts = _agreement_counts(rng, m, ERROR)
            kappa.append(fleiss_kappa(counts))
            alpha.append(krippendorff_alpha_nominal(counts))
            chance.append(fleiss_kappa(_agreement_counts(rng, m, 0.5)))
        kappa, alpha, chance = np.array(kappa), np.array(alpha), np.array(chance)
        cells["kappa mean"][m], cells["alpha mean"][m] = f"{kappa.mean():.3f}", f"{alpha.mean():.3f}"
        cells["kappa within"][m] = f"{np.mean(abs(kappa - truth) <= 0.05):6.1%}"
        cells["alpha within"][m] = f"{np.mean(abs(alpha - truth) <= 0.05):6.1%}"
        cells["chance"][m] = f"+/-{np.quantile(abs(chance), 0.95):.2f}"
        assert abs(kappa.mean() - truth) < 0.01 and abs(alpha.mean() - truth) < 0.01, (m, kappa.mean(), alpha.mean())
        assert abs(chance.mean()) < 0.01
    _show(f"Fleiss kappa ({RATERS} raters, true {truth:.3f}): mean", cells["kappa mean"])
    _show("Fleiss kappa: within +/- 0.05 of the truth", cells["kappa within"])
    _show(f"Krippendorff alpha (true {truth:.3f}): mean", cells["alpha mean"])
    _show("Krippendorff alpha: within +/- 0.05 of the truth", cells["alpha within"])
    _show("Fleiss kappa, raters guessing (true 0): 95% of runs", cells["chance"])
