"""Coverage of the corrected paired differences (``toolkit.analysis.physicians.corrected_differences``).

Two runs answer the same 250 cases (a points and an F1 benchmark of 125, tests/physicians_sim.py
``SimulatedPair``): a case's difficulty is shared, run b answers as run a would a case 0.15 harder, so the
runs' case scores are correlated and the true difference is about 0.147 (0.145 points, 0.150 F1); the judge
endorses 25% of unmet negative items and misses 10% of met positive ones in both. Physicians label both
runs' answers to the same n cases per benchmark, drawn at random within each (10, 20, 50 and 100 labelled
cases in all), 1,000 replicates: Monte Carlo SE 0.69%, so the test accepts coverage >= 94% less 1.96 SE
(92.6%) and at most 98%. Measured (seeds 5 / 6), the overall difference:

    labelled cases in all         10            20            50            100
    overall                  97.3 / 96.0   95.8 / 94.4   92.9 / 93.7   95.1 / 94.5
    per benchmark (points, F1) no interval  95.3, 96.5    94.5, 95.1    94.8, 94.8   (seed 5)
                                            95.4, 95.7    94.8, 94.9    94.1, 95.5   (seed 6)

At 50 labelled cases (25 per benchmark, lambda tuned) the overall covered 93.3% over both seeds (2,000
replicates, SE 0.5%): a little short of 95%. Below 10 labelled cases per benchmark a benchmark's own
difference has no interval (``MIN_LABELLED``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests import physicians_sim as sim
from toolkit.analysis.physicians import OVERALL, corrected_differences

REPLICATES = 1000
SHIFT = 0.15
SE = (0.95 * 0.05 / REPLICATES) ** 0.5


@pytest.fixture(scope="module")
def pair_world() -> tuple[sim.SimulatedPair, dict[str, float]]:
    items = sim.rubric(2, 125)
    truths = sim.true_differences(items, SHIFT)
    return sim.SimulatedPair(items, REPLICATES, 50, seed=5, shift=SHIFT), {**truths, OVERALL: float(
        np.mean(list(truths.values())))}


@pytest.mark.parametrize("per_benchmark", [5, 10, 25, 50])
def test_corrected_differences_cover_the_true_difference(pair_world, per_benchmark: int) -> None:
    world, truths = pair_world
    rows = corrected_differences(world.cases(per_benchmark), world.data, world.runs)
    assert rows.height == 3 * REPLICATES  # one pair per replicate: two benchmarks and the overall
    assert rows.filter(pl.col("benchmark") == OVERALL)["labelled_cases"].unique().to_list() == [2 * per_benchmark]
    for bench, truth in truths.items():
        mine = rows.filter(pl.col("benchmark") == bench)
        if bench != OVERALL and per_benchmark < 10:  # fewer than MIN_LABELLED: said, no interval
            assert mine["ci_low"].null_count() == REPLICATES
            continue
        assert mine["ci_low"].null_count() == 0
        coverage = float(((mine["ci_low"] <= truth) & (mine["ci_high"] >= truth)).mean())
        message = (f"{bench}, {2 * per_benchmark} labelled cases: {coverage:.1%} (Monte Carlo SE {SE:.2%})")
        print(message)
        assert 0.94 - 1.96 * SE <= coverage <= 0.98, message
