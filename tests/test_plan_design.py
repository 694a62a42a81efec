"""The design planner (toolkit.analysis.design): the variance of a paired case difference under K answers and
J judge passes, the cheapest design for a target, the best design for a budget, and by simulation: two models
with planted case, answer and judge components, collected at the planned design and compared with the
toolkit's paired t, show the difference about 80% of the time."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from toolkit.analysis.design import Components, components_from_rows, plan_design
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.planning import power

PLANTED = {"var_case": 0.20 ** 2, "var_answer": 0.15 ** 2, "var_judge": 0.05 ** 2}
RHO = 0.5


def _components(benchmarks: int = 4) -> list[Components]:
    return components_from_rows([{"benchmark": f"b{i}", **PLANTED} for i in range(benchmarks)], RHO)


def test_the_variance_of_a_paired_difference_by_hand() -> None:
    one = Components("x", 0.04, 0.0225, 0.0025, 0.5)
    assert one.difference_variance(1, 1) == pytest.approx(2 * 0.5 * 0.04 + 2 * 0.0225 + 2 * 0.0025, abs=1e-15)
    assert one.difference_variance(3, 2) == pytest.approx(0.04 + 2 * 0.0225 / 3 + 2 * 0.0025 / 6, abs=1e-15)
    two = components_from_rows([{"run_id": "a", "benchmark": "x", "var_case": 0.04, "var_answer": 0.01,
                                 "var_judge": 0.002},
                                {"run_id": "b", "benchmark": "x", "var_case": 0.09, "var_answer": 0.03,
                                 "var_judge": 0.004}], {"x": 0.3})[0]
    assert two.difference_variance(2, 1) == pytest.approx(
        0.04 + 0.09 - 2 * 0.3 * 0.2 * 0.3 + (0.01 + 0.03) / 2 + (0.002 + 0.004) / 2, abs=1e-15)


def test_bad_components_are_one_line_each() -> None:
    with pytest.raises(ValueError, match="record 0: var_judge is missing"):
        components_from_rows([{"benchmark": "x", "var_case": 0.1, "var_answer": 0.1}], 0.5)
    with pytest.raises(ValueError, match="non-negative"):
        components_from_rows([{"benchmark": "x", "var_case": -0.1, "var_answer": 0.1, "var_judge": 0}], 0.5)
    with pytest.raises(ValueError, match="rho must be in"):
        components_from_rows([{"benchmark": "x", **PLANTED}], 1.5)
    with pytest.raises(ValueError, match="give a target difference"):
        plan_design(_components(), 0.01, 0.01)
    # Scores lie in [0, 1]: a variance of 1e300 is no score's, and an endless budget buys no design.
    with pytest.raises(ValueError, match="at most 1"):
        components_from_rows([{"benchmark": "x", "var_case": 1e300, "var_answer": 0.1, "var_judge": 0}], 0.5)
    with pytest.raises(ValueError, match="budget inf must be"):
        plan_design(_components(), 0.01, 0.01, budget=math.inf)
    # No variance at all: every design would "detect" any difference with power 1, which no test can earn
    # (a pair that never varies has no interval; its exact sign test needs cases).
    flat = components_from_rows([{"benchmark": "x", "var_case": 0.0, "var_answer": 0.0, "var_judge": 0.0}], 0.5)
    with pytest.raises(ValueError, match="no variance"):
        plan_design(flat, 0.01, 0.001, target_mdd=0.05)


def test_the_chosen_design_is_the_cheapest_that_reaches_the_target() -> None:
    plan = plan_design(_components(), answer_cost=0.002, judge_cost=0.004, target_mdd=0.05)
    table = plan.alternatives
    assert table.height == 5 * 3  # K = 1..5, J = 1..3
    feasible = table.filter(table["feasible"])
    assert plan.chosen["cost_usd"] == feasible["cost_usd"].min()
    for row in feasible.iter_rows(named=True):
        sds = [math.sqrt(c.difference_variance(row["answers_per_case"], row["judge_passes"])) for c in _components()]
        n = row["cases_per_benchmark"]
        assert power(sds, n, 0.05) >= 0.8 > power(sds, n - 1, 0.05)  # the fewest cases reaching 80%
        assert row["cost_usd"] == pytest.approx(2 * n * 4 * row["answers_per_case"]
                                                * (0.002 + row["judge_passes"] * 0.004), rel=1e-12)
    # cases to spare: one answer and one pass per case is cheapest (module doc)
    assert (plan.chosen["answers_per_case"], plan.chosen["judge_passes"]) == (1, 1)
    assert "cheapest design detecting a macro-mean difference of 0.05" in plan.lines()[0]


def test_a_budget_buys_the_smallest_detectable_difference() -> None:
    plan = plan_design(_components(), answer_cost=0.002, judge_cost=0.004, budget=20.0)
    feasible = plan.alternatives.filter(plan.alternatives["feasible"])
    assert plan.chosen["mdd"] == feasible["mdd"].min() and plan.chosen["cost_usd"] <= 20.0
    assert feasible["within_budget"].all()
    over = plan_design(_components(), answer_cost=0.002, judge_cost=0.004, target_mdd=0.01, budget=1.0)
    assert "over the budget of $1.00" in over.lines()[1]


def _simulated_power(comps: list[Components], n: int, answers: int, passes: int, delta: float, reps: int,
                     seed: int) -> float:
    """Share of ``reps`` simulated comparisons in which the paired t rejects at 5%: run A is ``delta`` better in
    every benchmark; case effects correlate rho between runs; answers and passes are drawn per run."""
    rng = np.random.default_rng(seed)
    columns = []
    for c in comps:
        shared = rng.standard_normal((reps, n))
        own = rng.standard_normal((reps, n))
        case_a = math.sqrt(c.var_case) * shared
        case_b = math.sqrt(c.var_case) * (c.rho * shared + math.sqrt(1 - c.rho ** 2) * own)
        scores = []
        for case in (case_a, case_b):
            answer = math.sqrt(c.var_answer) * rng.standard_normal((reps, n, answers, 1))
            judge = math.sqrt(c.var_judge) * rng.standard_normal((reps, n, answers, passes))
            scores.append(0.6 + case + (answer + judge).mean(axis=(2, 3)))  # mean over answers and passes
        columns.append(scores[0] + delta - scores[1])
    differences = np.concatenate(columns, axis=1)
    strata = [slice(i * n, (i + 1) * n) for i in range(len(comps))]
    return float((paired_t(differences, strata).p_value < 0.05).mean())


def test_at_the_planned_design_the_paired_t_finds_the_target_difference_80_percent_of_the_time() -> None:
    comps = _components()
    # 45 cases per benchmark: too few for one answer per case, so the plan buys answers per case
    plan = plan_design(comps, answer_cost=0.002, judge_cost=0.004, target_mdd=0.05, max_cases=45)
    c = plan.chosen
    assert c["answers_per_case"] > 1 and c["cases_per_benchmark"] <= 45
    reps = 6000  # binomial sd of the rate ~0.5 points: the 78-82% band is four sds wide each way
    found = _simulated_power(comps, c["cases_per_benchmark"], c["answers_per_case"], c["judge_passes"], 0.05,
                             reps, seed=19)
    print(f"\nplanned design {c['cases_per_benchmark']} cases x {c['answers_per_case']} answers x "
          f"{c['judge_passes']} passes: planned power {c['power']:.1%}, simulated {found:.1%}")  # docs/methods.md
    assert 0.78 <= found <= 0.82, (found, c)


def test_the_correlation_of_case_means_is_the_scores_covariance_over_the_case_variances() -> None:
    import polars as pl

    from toolkit.analysis.design import case_mean_correlation

    rng = np.random.default_rng(7)
    n, rho, var_case, noise = 4000, 0.6, 0.04, 0.03  # noise: answer and judge parts of one case score
    shared, own = rng.standard_normal(n), rng.standard_normal(n)
    a = 0.2 * shared + math.sqrt(noise) * rng.standard_normal(n)
    b = 0.2 * (rho * shared + math.sqrt(1 - rho ** 2) * own) + math.sqrt(noise) * rng.standard_normal(n)
    cases = pl.DataFrame({"run_id": ["A"] * n + ["B"] * n, "benchmark": ["x"] * (2 * n),
                          "case_id": [str(i) for i in range(n)] * 2, "score": [*a, *b]})
    found = case_mean_correlation(cases, "A", "B", {"x": var_case}, {"x": var_case})["x"]
    assert found == pytest.approx(np.cov(a, b)[0, 1] / var_case, rel=1e-9)  # the identity, exactly
    assert found == pytest.approx(rho, abs=0.05)  # the planted rho, not the noise-attenuated one
    assert np.corrcoef(a, b)[0, 1] < rho - 0.15  # what the observed scores' correlation would have said
    assert case_mean_correlation(cases, "A", "B", {}, {"x": var_case}) == {}  # unknown case variance: left out


def test_records_from_components_fold_what_a_design_cannot_tell_apart() -> None:
    """One answer per case: case+answer is planned as the case part and designs keep one answer; a negative
    estimate is planned as 0; overall rows are left out; each with a note."""
    from toolkit.analysis.design import records_from_components

    frame = pl.DataFrame({
        "run_id": ["a"] * 4 + ["b"] * 3,
        "benchmark": ["x", "x", "x", "overall", "x", "x", "x"],
        "component": ["case", "answer", "judge", "case", "case+answer", "answer", "judge"],
        "variance": [0.04, -0.001, 0.002, 9.0, 0.05, None, 0.003]})
    records, fixed, notes = records_from_components(frame)
    assert records == [{"run_id": "a", "benchmark": "x", "var_case": 0.04, "var_answer": 0.0, "var_judge": 0.002},
                       {"run_id": "b", "benchmark": "x", "var_case": 0.05, "var_answer": 0.0, "var_judge": 0.003}]
    assert fixed == {"answers"} and len(notes) == 2 and "below 0" in notes[0] and "one answer per case" in notes[1]
