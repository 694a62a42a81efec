"""Coverage and false-positive rates of every interval and test at 3, 10, 25 and 50 cases per benchmark.

Measured (seeds fixed; 5,000 replicates per size unless said), cases per benchmark:

    figure                                                      3       10      25      50
    run overall, stratified t: coverage                       96.1%   95.0%   95.1%   94.4%
    run overall, percentile bootstrap: coverage (2,000 runs)  87.5%   93.5%   94.2%   94.5%
    one benchmark, run (one-sample t): coverage               93.9%   93.7%*  94.6%   94.5%
    one benchmark, pair (paired t): coverage                  98.2%   95.7%   95.2%   94.8%
      lowest single benchmark: run                            82.6%   90.6%   93.5%   92.5%
      lowest single benchmark: pair                           96.3%   94.9%   94.5%   94.0%
      no variation, so no interval (left out above): run       9.9%    1.2%   <0.1%    0
      no variation, so no interval (left out above): pair     10.0%    0.9%   <0.1%    0
    pair overall, stratified paired t: coverage               96.5%   95.0%   94.7%   95.3%
    pair overall, stratified paired t: false positives         3.9%    4.7%    5.0%    4.7%
    van Elteren: false positives                               4.8%    5.0%    4.8%    4.7%
    van Elteren: power, skill 1 vs 0.85 (2,000 pairs)         34.1%   81.5%   99.5%  100.0%
    stratified paired t: power, same pairs                    19.7%   62.0%   95.8%  100.0%
    Holm over the 6 pairs of 4 equal runs: FWER (2,500)        1.2%    4.8%    3.9%    4.6%
    the same 6 pairs uncorrected: FWER                        13.8%   21.9%   19.9%   21.1%

* Below nominal: the one-sample t of a single benchmark's mean at 10 cases under-covers skewed scores
  (its worst benchmark: 90.6% of the intervals given; a pure 0/1 benchmark at a mean of 0.19 scores 0 on
  every case in 12% of its 10-case runs, where no spread can be estimated). Counting the
  benchmarks without an interval as misses, the one-benchmark rates at 3 and 10 cases are 84.6% and 92.6%
  (run), 88.4% and 94.8% (pair). The same pure 0/1
  benchmark is still at 92.5% with 50 cases: the Wald interval's known oscillating under-coverage of
  0/1 data. Every other coverage is held to 94-96% at 10, 25 and 50 cases (false positives to 4-6%,
  van Elteren's to 3.5-6.5%, Holm's FWER to at most 5% + 3.5 SE); at 3 cases the figures are reported.

Design (tests/analysis_sim.py): 10 benchmarks; each case has a latent difficulty t ~ Beta(a_b, b_b)
shared by every run graded on it (runs are correlated through their cases); eight points-rubric
benchmarks (1-10 positive items and a harmful one: coarse scores with point masses at 0 and 1) and two
F1-like ones (near-continuous, 4 digits, 15% exact zeros). A run of skill s scores ``rubric_scores(s t)``;
its true benchmark means are exact (``expected_scores(s)``). Null pairs: two runs of skill 1 on the same
cases; non-null pairs: skill 1 against skill 0.85 (true overall difference ~0.08). Thousands of
replicates sit side by side in one matrix; seeds are fixed, so the figures are deterministic.
``python -m pytest -s tests/test_calibration_coverage.py`` prints them.

Intervals whose estimator gives no interval (NaN, e.g. no variation at all) are left out of the rate
and counted ("no interval" when printed): they must be rare (< 1%) wherever a rate is held. "flat"
counts the replicates whose differences do not vary at all (se 0), which get no interval (``ci_note``
says why), never a point range; the held rates are over the intervals given.
"""

from __future__ import annotations

import numpy as np

from toolkit.analysis.multiplicity import holm
from toolkit.analysis.paired import ResampleSettings, draw_resamples, percentile_interval
from toolkit.analysis.paired_t import PairedT, paired_t
from toolkit.analysis.van_elteren import van_elteren_p
from toolkit.analysis.wilcoxon import wilcoxon_p

from tests.analysis_sim import SIM_BENCHMARKS, difficulties, expected_scores, rubric_scores

CASES = (3, 10, 25, 50)  # per benchmark: the demo sample, small runs, the public split, large runs
CHECKED = (10, 25, 50)  # sizes held to the nominal rate; at 3 the figure is reported
WEAKER = 0.85  # the second run's skill in non-null pairs
LEVEL = 0.05
RUNS = 5_000  # replicates per size (runs or pairs): a 95% rate is measured to +/- 0.3% (one SE)
POWER_PAIRS = 2_000  # non-null pairs for the power figures (not held to a rate)
FAMILIES = 2_500  # families of 4 runs per size
BOOTSTRAP_RUNS, BOOTSTRAP_DRAWS = 2_000, 2_000  # the leaderboard draws 10,000: the same interval up to noise


def _strata(cases: int) -> tuple[slice, ...]:
    return tuple(slice(b * cases, (b + 1) * cases) for b in range(SIM_BENCHMARKS))


def _runs(seed: int, replicates: int, cases: int, skills: tuple[float, ...]) -> list[np.ndarray]:
    """Per skill, (replicates, benchmarks x cases) scores of runs graded on the same simulated cases."""
    rng = np.random.default_rng(seed)
    t = difficulties(rng, replicates, cases)
    return [rubric_scores(rng, skill * t).reshape(replicates, -1) for skill in skills]


Figure = tuple[float, float, float]  # (rate among replicates with an interval or p, share without, share flat)


def _coverage(t: PairedT, truth: np.ndarray | float) -> Figure:
    """Share of the intervals given that cover ``truth``, share of replicates without an interval, share
    whose differences do not vary (se 0 or NaN: ``paired_t`` gives them no interval)."""
    given = ~(np.isnan(t.ci_low) | np.isnan(t.ci_high))
    covered = (t.ci_low <= truth) & (truth <= t.ci_high)
    return covered[given].mean(), 1.0 - given.mean(), (~(t.se > 0)).mean()


def _rejections(p: np.ndarray, flat: np.ndarray | None = None) -> Figure:
    """Share of the p-values given below LEVEL, share of replicates without one, share flat."""
    given = ~np.isnan(p)
    return (p[given] < LEVEL).mean(), 1.0 - given.mean(), 0.0 if flat is None else flat.mean()


def _show(what: str, figures: dict[int, Figure]) -> None:
    cells = []
    for m, (rate, none, flat) in figures.items():
        notes = [(f"{share:.1%}" if share >= 0.0005 else "<0.1%") + f" {name}"
                 for share, name in ((none, "no interval"), (flat, "flat")) if share]
        cells.append(f"{m:>2}: {rate:6.1%}" + (f" ({', '.join(notes)})" if notes else ""))
    print(f"\n{what:<46} " + "  ".join(cells))


def _assert_nominal(what: str, figures: dict[int, Figure], low: float, high: float,
                    sizes: tuple[int, ...] = CHECKED) -> None:
    for m in sizes:
        rate, none, _ = figures[m]
        assert low <= rate <= high, f"{what} at {m} cases per benchmark: {rate:.2%}"
        assert none < 0.01, f"{what} at {m} cases per benchmark: {none:.2%} without an interval"


def _bootstrap_run_intervals(scores: np.ndarray, cases: int, samples: int, seed: int
                             ) -> tuple[np.ndarray, np.ndarray]:
    """The leaderboard's percentile interval of each run's macro mean (cases resampled per benchmark,
    one shared draw for all runs, as ``compare`` does)."""
    res = draw_resamples([(f"bench_{b}", cases) for b in range(SIM_BENCHMARKS)], ResampleSettings(samples, seed))
    macro = sum(res.stratum_sums(scores, b) for b in range(SIM_BENCHMARKS)) / (cases * SIM_BENCHMARKS)
    return percentile_interval(macro)


def test_run_intervals_stratified_t_covers_the_macro_mean_better_than_the_bootstrap() -> None:
    truth = expected_scores().mean()
    t_figures, boot_figures = {}, {}
    for m in CASES:
        (scores,) = _runs(100 + m, RUNS, m, (1.0,))
        t_figures[m] = _coverage(paired_t(scores, _strata(m)), truth)
        low, high = _bootstrap_run_intervals(scores[:BOOTSTRAP_RUNS], m, BOOTSTRAP_DRAWS, 200 + m)
        boot_figures[m] = ((low <= truth) & (truth <= high)).mean(), 0.0, 0.0
    _show("run overall: stratified t", t_figures)
    _show("run overall: percentile bootstrap", boot_figures)
    _assert_nominal("run overall (stratified t)", t_figures, 0.94, 0.96)
    for m in (3, 10):
        assert abs(t_figures[m][0] - 0.95) < abs(boot_figures[m][0] - 0.95), \
            f"at {m} cases the t ({t_figures[m][0]:.2%}) is no closer to 95% than the bootstrap " \
            f"({boot_figures[m][0]:.2%})"


def test_single_benchmark_run_and_pair_intervals() -> None:
    """Pooled over the 10 benchmarks. The one-sample t of one run's benchmark mean falls short at 10
    cases: skewed scores (a pure 0/1 benchmark at a mean of 0.19: 88%; the F1 ones: 91%)."""
    strong, weak = expected_scores(), expected_scores(WEAKER)
    run_figures, pair_figures, lowest = {}, {}, {}
    for m in CASES:
        a, b = _runs(300 + m, RUNS, m, (1.0, WEAKER))
        runs = [_coverage(paired_t(a[:, s]), strong[k]) for k, s in enumerate(_strata(m))]
        pairs = [_coverage(paired_t(a[:, s] - b[:, s]), strong[k] - weak[k]) for k, s in enumerate(_strata(m))]
        run_figures[m], pair_figures[m] = tuple(np.mean(runs, axis=0)), tuple(np.mean(pairs, axis=0))
        lowest[m] = min(f[0] for f in runs), min(f[0] for f in pairs)
    _show("one benchmark, run: one-sample t", run_figures)
    _show("one benchmark, pair: paired t", pair_figures)
    print("lowest single benchmark (run, pair):          "
          + "  ".join(f"{m:>2}: {r:.1%}, {p:.1%}" for m, (r, p) in lowest.items()))
    _assert_nominal("one benchmark, pair", pair_figures, 0.94, 0.96)
    _assert_nominal("one benchmark, run", run_figures, 0.94, 0.96, sizes=(25, 50))
    # Below nominal at 10 (see the docstring), held where it is so a change either way is seen; the upper
    # bound leaves room for the flat replicates (1.2%), which get no interval and are left out of the rate.
    assert 0.915 <= run_figures[10][0] <= 0.945, f"one benchmark, run at 10 cases: {run_figures[10][0]:.2%}"


def test_overall_paired_difference_covers_and_rejects_5_percent_of_nulls() -> None:
    truth = (expected_scores() - expected_scores(WEAKER)).mean()
    coverage, false_positives = {}, {}
    for m in CASES:
        a, b = _runs(400 + m, RUNS, m, (1.0, WEAKER))
        coverage[m] = _coverage(paired_t(a - b, _strata(m)), truth)
        a, b = _runs(500 + m, RUNS, m, (1.0, 1.0))
        t = paired_t(a - b, _strata(m))
        false_positives[m] = _rejections(t.p_value, ~(t.se > 0))
    _show("pair overall: coverage, stratified paired t", coverage)
    _show("pair overall: false positives (null)", false_positives)
    _assert_nominal("pair overall coverage", coverage, 0.94, 0.96)
    _assert_nominal("pair overall false positives", false_positives, 0.04, 0.06)


def test_van_elteren_rejects_5_percent_of_nulls_and_detects_a_real_difference() -> None:
    false_positives, power, t_power = {}, {}, {}
    for m in CASES:
        a, b = _runs(600 + m, RUNS, m, (1.0, 1.0))
        false_positives[m] = _rejections(van_elteren_p(a - b, _strata(m)))
        a, b = _runs(650 + m, POWER_PAIRS, m, (1.0, WEAKER))
        power[m] = _rejections(van_elteren_p(a - b, _strata(m)))
        t_power[m] = _rejections(paired_t(a - b, _strata(m)).p_value)
    _show("van Elteren: false positives (null)", false_positives)
    _show("van Elteren: power (skill 1 vs 0.85)", power)
    _show("stratified paired t: power (same pairs)", t_power)
    _assert_nominal("van Elteren false positives", false_positives, 0.035, 0.065)
    assert all(power[m][0] > 0.5 for m in CHECKED), "the test barely sees a difference of 0.08"



def test_per_benchmark_wilcoxon_rejects_at_most_5_percent_of_nulls() -> None:
    """The signed-rank p of one benchmark's paired differences (the per-benchmark rows' wilcoxon_p: normal,
    permutation or exact branch as scipy picks them) on rubric-shaped scores, and on continuous scores
    without ties, which take the exact branch counted in toolkit/analysis/wilcoxon.py."""
    rubric, continuous = {}, {}
    for m in CASES:
        a, b = _runs(700 + m, RUNS, m, (1.0, 1.0))
        rubric[m] = _rejections(wilcoxon_p((a - b)[:, :m]))
        rng = np.random.default_rng(750 + m)
        continuous[m] = _rejections(wilcoxon_p(rng.normal(0.0, 0.2, (RUNS, m))))
    _show("wilcoxon per benchmark: false positives, rubric", rubric)
    _show("wilcoxon per benchmark: false positives, no ties", continuous)
    # rubric scores: a pair whose differences are all zero has no p (7 % of them at 10 cases); the rest hold
    assert all(rubric[m][0] <= 0.06 for m in CHECKED), rubric
    _assert_nominal("wilcoxon (rubric scores) false positives", rubric, 0.03, 0.06, sizes=(25, 50))
    _assert_nominal("wilcoxon (no ties) false positives", continuous, 0.035, 0.06)
    assert rubric[3][0] == continuous[3][0] == 0.0  # 3 cases: the smallest two-sided p is 0.25

def test_holm_over_all_pairs_of_4_equal_runs_keeps_the_family_wise_error() -> None:
    first, second = np.triu_indices(4, k=1)
    family_errors, raw_errors = {}, {}
    for m in CASES:
        runs = np.stack(_runs(700 + m, FAMILIES, m, (1.0,) * 4), axis=1)  # (families, 4 runs, cases)
        differences = (runs[:, first] - runs[:, second]).reshape(-1, runs.shape[-1])
        p = paired_t(differences, _strata(m)).p_value.reshape(FAMILIES, first.size)
        family_errors[m] = np.mean([np.nanmin(holm(row), initial=1.0) < LEVEL for row in p]), 0.0, 0.0
        raw_errors[m] = (p < LEVEL).any(axis=1).mean(), 0.0, 0.0
    _show("Holm over the 6 pairs of 4 equal runs: FWER", family_errors)
    _show("the same 6 pairs uncorrected: FWER", raw_errors)
    slack = 3.5 * np.sqrt(LEVEL * (1 - LEVEL) / FAMILIES)
    for m in CHECKED:
        assert family_errors[m][0] <= LEVEL + slack, f"Holm FWER at {m} cases: {family_errors[m][0]:.2%}"
        assert raw_errors[m][0] > 0.12, "six tests at 5% without a correction reject far more often"
