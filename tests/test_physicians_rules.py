"""The rules of the physician correction pinned at their edges: lambda is tuned from exactly 20 labelled
cases in a benchmark (below that it is N / (N + n)), in a benchmark's own estimate and in the macro mean
weighted over benchmarks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from toolkit.analysis.physician_stats import ppi_mean
from toolkit.analysis.physicians import MIN_TUNED, OVERALL, corrected_means, fixed_lambda


def _cases(labelled: dict[str, int], total: int, seed: int = 5) -> pl.DataFrame:
    """One run; per benchmark ``total`` cases of which the first ``labelled[b]`` carry physician scores that
    follow the judge's with a slope of one half (so a tuned lambda is far from N / (N + n))."""
    rng = np.random.default_rng(seed)
    rows = []
    for bench, n in labelled.items():
        judge = rng.random(total)
        physician = np.clip(0.5 * judge + 0.25 + rng.normal(0, 0.05, total), 0, 1)
        for i in range(total):
            lab = i < n
            rows.append({"run_id": "r", "case_id": f"{bench}{i}", "benchmark": bench, "judge": judge[i],
                         "judge_labelled": judge[i] if lab else None, "physician": physician[i] if lab else None,
                         "labels": 4 if lab else None})
    return pl.DataFrame(rows)


@pytest.mark.parametrize("n", [MIN_TUNED - 1, MIN_TUNED])
def test_lambda_is_tuned_from_exactly_twenty_labelled_cases(n: int) -> None:
    assert MIN_TUNED == 20
    cases = _cases({"b": n}, 60)
    row = corrected_means(cases, ["r"])[0].filter(pl.col("benchmark") == "b").row(0, named=True)
    lab = cases.filter(pl.col("physician").is_not_null())
    rest = cases.filter(pl.col("physician").is_null())
    tuned = ppi_mean(lab["physician"].to_numpy(), lab["judge_labelled"].to_numpy(), rest["judge"].to_numpy()).lam
    fixed = fixed_lambda(n, 60 - n)
    assert abs(tuned - fixed) > 0.2  # the two rules give different lambdas here
    assert row["lam"] == pytest.approx(tuned if n >= 20 else fixed, abs=1e-12)


@pytest.mark.parametrize("n", [MIN_TUNED - 1, MIN_TUNED])
def test_the_weighted_macro_mean_switches_at_twenty_labelled_cases_too(n: int) -> None:
    # benchmark "a" has one labelled case (too few of its own): the macro mean is one weighted PPI++ over all
    cases = _cases({"a": 1, "b": n - 1}, 40)
    overall = corrected_means(cases, ["r"])[0].filter(pl.col("benchmark") == OVERALL).row(0, named=True)
    assert overall["labelled_cases"] == n
    assert (overall["lam"] == pytest.approx(fixed_lambda(n, 80 - n), abs=1e-12)) == (n < 20)
