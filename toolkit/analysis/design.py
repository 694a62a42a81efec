"""Planning a comparison's design: how many cases, answers per case and judge passes, at the least cost.

A case score of a run with K answers per case and J judge passes per answer averages K x J gradings:

    s_i = mu + c_i + (1/K) sum_k a_ik + (1/(K J)) sum_k sum_j e_ikj,

c_i the case's own effect (variance var_case: between case means), a_ik an answer's departure from its
case's mean (var_answer: between answers within a case), e_ikj a judge pass's departure from its answer's
mean (var_judge: between passes within an answer), all independent. So

    Var(s_i) = var_case + var_answer / K + var_judge / (K J).

Two runs A and B answer the same cases; their case effects correlate with rho across cases (the same cases
are hard for both), while answers and judge passes are drawn afresh for each run and so are independent
between them. The paired case difference d_i = s_Ai - s_Bi of a benchmark then has variance

    Var(d_i) = var_case_A + var_case_B - 2 rho sqrt(var_case_A var_case_B)
               + (var_answer_A + var_answer_B) / K + (var_judge_A + var_judge_B) / (K J),

and with one set of components for both runs, 2 (1 - rho) var_case + 2 var_answer / K + 2 var_judge / (K J).
Only the last two terms shrink with K and J: past the point where case variance dominates, more answers or
passes buy nothing and more cases are the only way to a smaller difference.

The power of a design is that of the stratified paired t the comparisons run (``toolkit.analysis.planning``:
its SE, Welch-Satterthwaite df, two-sided LEVEL and the noncentral t), with sd_b = sqrt(Var(d_i)) of each
benchmark b and n cases in each. The cost of a design is that of collecting both runs:

    cost = 2 n B K (answer_cost + J judge_cost)      (B benchmarks; USD per answer call and per judge call).

Since n grows like Var(d_i), the cost grows like K var_case + var_answer + var_judge / J (times the per-call
prices): with cases to spare, one answer per case is always cheapest, and a second judge pass pays only when
judge noise is large against cheap judge calls (J* = sqrt(judge var x answer_cost / (rest x judge_cost))).
More answers per case pay when the cases run out: ``max_cases``, the cases each benchmark has (the same n is
planned in every benchmark, so the smallest benchmark's count).

``plan_design`` tries every (K, J) up to the given limits: for a target difference, the fewest cases per
benchmark that detect it with POWER (planning.cases_needed) and that design's cost, the cheapest wins; for a
budget, the most cases the budget buys and the difference they detect (planning.detectable), the smallest
wins. Ties go to fewer calls. The components are estimates taken as true (the usual planning approximation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import polars as pl

from toolkit.analysis.paired_t import LEVEL, POWER
from toolkit.analysis.planning import MAX_CASES, cases_needed, detectable, pair_variance, power

COMPONENTS = ("var_case", "var_answer", "var_judge")
DEFAULT_MAX_ANSWERS = 5
DEFAULT_MAX_PASSES = 3


@dataclass(frozen=True)
class Components:
    """One benchmark's variance components of ONE case score, for run A and run B (B's None: like A's)."""

    benchmark: str
    var_case: float
    var_answer: float
    var_judge: float
    rho: float
    var_case_b: float | None = None
    var_answer_b: float | None = None
    var_judge_b: float | None = None

    def difference_variance(self, answers: int, passes: int) -> float:
        """Var(d_i) of a paired case difference with ``answers`` per case and ``passes`` per answer (module doc)."""
        case_b = self.var_case if self.var_case_b is None else self.var_case_b
        answer_b = self.var_answer if self.var_answer_b is None else self.var_answer_b
        judge_b = self.var_judge if self.var_judge_b is None else self.var_judge_b
        case = self.var_case + case_b - 2.0 * self.rho * math.sqrt(self.var_case * case_b)
        return max(0.0, case) + (self.var_answer + answer_b) / answers + (self.var_judge + judge_b) / (answers * passes)


def components_from_rows(rows: Sequence[Mapping], rho: float | Mapping[str, float]) -> list[Components]:
    """Components per benchmark from records (benchmark, var_case, var_answer, var_judge[, run_id]): one record
    per benchmark (both runs alike) or one per run and benchmark for two runs; ``rho``: one for every benchmark
    or one per benchmark. ValueError on anything missing, negative or more than two runs."""
    by_benchmark: dict[str, list[Mapping]] = {}
    for i, row in enumerate(rows):
        for name in ("benchmark", *COMPONENTS):
            if row.get(name) is None:
                raise ValueError(f"planning: component record {i}: {name} is missing")
        values = [row[name] for name in COMPONENTS]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0
               for v in values):
            raise ValueError(f"planning: component record {i} ({row['benchmark']}): variances must be non-negative "
                             "numbers")
        if any(v > 1 for v in values):  # scores lie in [0, 1]: even an estimate's variance is at most 0.5
            raise ValueError(f"planning: component record {i} ({row['benchmark']}): a variance of scores in [0, 1] "
                             "is at most 1")
        by_benchmark.setdefault(str(row["benchmark"]), []).append(row)
    if not by_benchmark:
        raise ValueError("planning: no variance components given")
    out = []
    for benchmark, found in sorted(by_benchmark.items()):
        if len(found) > 2:
            raise ValueError(f"planning: benchmark {benchmark!r} has {len(found)} component records; give one, or one "
                             "per run of the pair")
        if len(found) == 2 and found[0].get("run_id") == found[1].get("run_id"):  # not runs A and B: a duplicate
            raise ValueError(f"planning: benchmark {benchmark!r} has 2 component records of one run "
                             f"({found[0].get('run_id')!r}); give one, or one per run of the pair (each with its "
                             "run_id)")
        r = rho.get(benchmark) if isinstance(rho, Mapping) else rho
        if r is None or isinstance(r, bool) or not isinstance(r, (int, float)) or not -1 <= r <= 1:
            raise ValueError(f"planning: benchmark {benchmark!r}: the between-model correlation rho must be in [-1, 1]")
        a, b = found[0], found[-1]
        out.append(Components(benchmark, *(float(a[c]) for c in COMPONENTS), float(r),
                              *((float(b[c]) for c in COMPONENTS) if len(found) == 2 else (None, None, None))))
    return out


# A part the runs' design could not tell apart (toolkit.analysis.variance's joint rows): the part it is planned
# as, and the design factor then held at the runs' own value (1).
_JOINT = {"case+answer": ("var_case", ("answers",)), "answer+judge": ("var_answer", ("passes",)),
          "case+answer+judge": ("var_case", ("answers", "passes"))}


def records_from_components(components: pl.DataFrame) -> tuple[list[dict], set[str], list[str]]:
    """Planner records (run_id, benchmark, var_case, var_answer, var_judge) from a variance budget's
    ``components`` frame, per run and benchmark (the overall rows left out); the design factors the runs
    cannot inform ("answers" with one answer per case, "passes" with one pass per answer: a joint part is
    planned as its upper part, the lower ones at 0, and that factor stays at 1); and notes saying so. A
    negative estimate (the unbiased estimate of a small part) is planned as 0."""
    records: dict[tuple[str, str], dict] = {}
    fixed: set[str] = set()
    notes: list[str] = []
    for row in components.filter(pl.col("benchmark") != "overall").iter_rows(named=True):
        record = records.setdefault((row["run_id"], row["benchmark"]), {
            "run_id": row["run_id"], "benchmark": row["benchmark"], **dict.fromkeys(COMPONENTS, 0.0)})
        name, value = row["component"], row["variance"]
        if value is None:
            continue
        if value < 0:
            notes.append(f"{row['run_id']} {row['benchmark']}: the {name} variance estimate {value:.3g} is below 0 "
                         "(an unbiased estimate of a variance near 0 can fall below it): planned as 0")
            value = 0.0
        if name in _JOINT:
            column, held = _JOINT[name]
            fixed.update(held)
            record[column] = value
        else:
            record[f"var_{name}"] = value
    if "answers" in fixed:
        notes.append("a run has one answer per case: the answer part is not told apart from the case part, so "
                     "every design keeps one answer per case (collect with --answer-samples 2 or more to plan it)")
    if "passes" in fixed:
        notes.append("a run has one judge pass per answer: the judge part is not told apart from the answer part, "
                     "so every design keeps one pass (judge with --judge-passes 2 or more to plan it)")
    return list(records.values()), fixed, notes


def case_mean_correlation(cases: pl.DataFrame, run_a: str, run_b: str, var_case_a: Mapping[str, float],
                          var_case_b: Mapping[str, float]) -> dict[str, float]:
    """Per benchmark, the correlation rho of the two runs' case MEANS from their observed case scores
    (``per_case`` rows): answer and judge noise is drawn afresh for each run, so the scores' covariance is the
    case means' and rho = cov(s_A, s_B) / sqrt(var_case_A var_case_B) (clipped to [-1, 1]). Benchmarks where
    a run's scores do not vary or a case variance is 0 or unknown are left out."""
    out = {}
    for row in pair_variance(cases, run_a, run_b).iter_rows(named=True):
        va, vb = var_case_a.get(row["benchmark"]), var_case_b.get(row["benchmark"])
        if row["rho"] is None or not va or not vb:
            continue
        out[row["benchmark"]] = max(-1.0, min(1.0, row["rho"] * row["sd_a"] * row["sd_b"] / math.sqrt(va * vb)))
    return out


def usd(amount: float) -> str:
    """Dollars to the cent; an amount past a trillion (or below a cent) in 4 significant digits, never as 300."""
    if amount != 0 and not 0.01 <= abs(amount) < 1e12:
        return f"${amount:.4g}"
    return f"${amount:,.2f}"


@dataclass(frozen=True, eq=False)
class DesignPlan:
    """The chosen design and every alternative considered (``alternatives``, one row per K and J)."""

    chosen: dict  # the alternatives row of the chosen design
    alternatives: pl.DataFrame
    target_mdd: float | None
    budget: float | None
    benchmarks: tuple[str, ...]
    target: float
    level: float

    def lines(self) -> list[str]:
        """What ``bedside plan`` prints above the table."""
        c, b = self.chosen, len(self.benchmarks)
        design = (f"{c['cases_per_benchmark']} cases per benchmark ({c['cases']} in {b} benchmark{'s' * (b != 1)}), "
                  f"{c['answers_per_case']} answer{'s' * (c['answers_per_case'] != 1)} per case, "
                  f"{c['judge_passes']} judge pass{'es' * (c['judge_passes'] != 1)} per answer")
        cost = f"{usd(c['cost_usd'])} for both runs"
        if self.target_mdd is not None:
            out = [f"cheapest design detecting a macro-mean difference of {self.target_mdd:g} with "
                   f"{self.target:.0%} power (two-sided {self.level:g}): {design}; {cost} (power {c['power']:.3f})"]
            if self.budget is not None and c["cost_usd"] > self.budget:
                out.append(f"over the budget of {usd(self.budget)}: no design considered reaches the target within it")
            return out
        return [f"smallest difference detectable with {self.target:.0%} power (two-sided {self.level:g}) for "
                f"{usd(self.budget)}: {c['mdd']:.4f} with {design}; {cost}"]


def plan_design(components: Sequence[Components], answer_cost: float, judge_cost: float, *,
                target_mdd: float | None = None, budget: float | None = None,
                max_answers: int = DEFAULT_MAX_ANSWERS, max_passes: int = DEFAULT_MAX_PASSES,
                max_cases: int | None = None, target: float = POWER, level: float = LEVEL) -> DesignPlan:
    """The least-cost (cases per benchmark, answers per case, judge passes) design detecting ``target_mdd`` with
    ``target`` power, or (no target) the one detecting the smallest difference for ``budget`` USD; both: the
    target's design, said to be over budget when it is. ``max_cases``: cases per benchmark available (designs
    needing more are not feasible). ``answer_cost`` / ``judge_cost``: USD per call (module doc)."""
    if target_mdd is None and budget is None:
        raise ValueError("planning: give a target difference (target_mdd), a budget, or both")
    if target_mdd is not None and not 0 < target_mdd < 1:
        raise ValueError(f"planning: target difference {target_mdd} must be between 0 and 1 (a macro-mean score)")
    if budget is not None and not 0 < budget < math.inf:
        raise ValueError(f"planning: budget {budget} must be a positive number of USD")
    for name, value in (("answer_cost", answer_cost), ("judge_cost", judge_cost)):
        if value is None or not math.isfinite(value) or value < 0:
            raise ValueError(f"planning: {name} {value} must be a non-negative number of USD per call")
    if answer_cost == 0 and judge_cost == 0:
        raise ValueError("planning: both calls cost nothing: every design is free, there is nothing to plan")
    if max_answers < 1 or max_passes < 1:
        raise ValueError("planning: max_answers and max_passes must be at least 1")
    comps = list(components)
    if not comps:
        raise ValueError("planning: no variance components given")
    if all(c.difference_variance(1, 1) == 0 for c in comps):  # any design would claim power 1
        raise ValueError("planning: the components give no variance between the runs' case scores (all 0, or the "
                         "runs never differ): no test can be planned on them; check the components")
    n_bench = len(comps)
    limit = MAX_CASES if max_cases is None else max_cases
    rows = []
    for answers in range(1, max_answers + 1):
        for passes in range(1, max_passes + 1):
            sds = [math.sqrt(c.difference_variance(answers, passes)) for c in comps]
            per_case = 2 * answers * (answer_cost + passes * judge_cost)  # both runs, one case
            if target_mdd is not None:
                try:
                    n = cases_needed(sds, target_mdd, target, level)
                except ValueError:
                    n = None
            else:
                n = int(min(limit, budget // (per_case * n_bench))) if per_case > 0 else limit  # inf: the limit
                n = n if n >= 2 else None
            feasible = n is not None and n <= limit
            n_used = n if n is not None and n >= 2 else None
            rows.append({
                "answers_per_case": answers, "judge_passes": passes, "cases_per_benchmark": n,
                "cases": None if n is None else n * n_bench,
                "answer_calls": None if n is None else 2 * n * n_bench * answers,
                "judge_calls": None if n is None else 2 * n * n_bench * answers * passes,
                "cost_usd": None if n is None else n * n_bench * per_case,
                "sd_diff": math.sqrt(sum(s * s for s in sds) / n_bench),
                "power": None if n_used is None else power(sds, n_used, target_mdd, level) if target_mdd else target,
                "mdd": None if n_used is None else detectable(sds, n_used, target, level),
                "feasible": feasible,
                "within_budget": None if budget is None or n is None else n * n_bench * per_case <= budget + 1e-9,
            })
    table = pl.DataFrame(rows, schema_overrides={"cases_per_benchmark": pl.Int64, "cases": pl.Int64,
                                                 "answer_calls": pl.Int64, "judge_calls": pl.Int64,
                                                 "cost_usd": pl.Float64, "power": pl.Float64, "mdd": pl.Float64,
                                                 "within_budget": pl.Boolean})
    usable = table.filter(pl.col("feasible"))
    if usable.height == 0:
        what = (f"a difference of {target_mdd:g}" if target_mdd is not None else f"anything for {usd(budget)}")
        cap = f"{limit:,} cases per benchmark" if max_cases is not None else "the designs considered"
        raise ValueError(f"planning: no design detects {what} within {cap}")
    calls = pl.col("answer_calls") + pl.col("judge_calls")
    order = ["cost_usd", "calls"] if target_mdd is not None else ["mdd", "cost_usd", "calls"]
    best = usable.with_columns(calls=calls).sort(order).drop("calls").row(0, named=True)
    return DesignPlan(best, table, target_mdd, budget, tuple(c.benchmark for c in comps), target, level)
