"""``bedside plan``: the cheapest design (cases per benchmark, answers per case, judge passes) for a target
difference, or the smallest difference a budget detects, over ``toolkit.analysis.design.plan_design``.

Variance components come from ``--run A --run B`` (``toolkit.analysis.variance``'s estimates from the two
stored runs) or from ``--components FILE.json`` (a list of records benchmark, var_case, var_answer,
var_judge[, run_id][, rho], or an object holding such a list under "components" and optionally "rho"; a record
of benchmark "overall" is left out, the design being planned per benchmark). The runs also supply USD per
answer call and per judge call (their stored tokens x the price table) and the between-model correlation of
case means (the covariance of their case scores over the components' case variances).
"""

from __future__ import annotations

from typing import Any

import click

from toolkit.cli.common import CommandError, emit, say
from toolkit.cli.options import format_option, prices_option, store_option

COMPONENTS_FILE_LIMIT = 16 << 20  # bytes: a record per run and benchmark is far smaller
TABLE_COLUMNS = ("answers_per_case", "judge_passes", "cases_per_benchmark", "cases", "answer_calls", "judge_calls",
                 "cost_usd", "power", "mdd", "feasible", "within_budget")


MAX_CALL_USD = 1e6  # a dearer call is a typo, and its designs' dollars overflow to inf


@click.command("plan")
@click.option("--target-mdd", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Macro-mean difference to detect with 80% power (two-sided 5%).")
@click.option("--budget", type=click.FloatRange(0, min_open=True), default=None,
              help="USD for both runs: plan the smallest detectable difference (with --target-mdd: flag designs "
                   "over it).")
@click.option("--components", "components_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Variance components per benchmark (JSON; see `bedside plan --help`).")
@click.option("--run", "run_ids", multiple=True, help="The two runs whose costs and correlation to plan from "
              "(give it twice).")
@click.option("--rho", type=click.FloatRange(-1, 1), default=None,
              help="Between-model correlation of case means (default: from the file, else from --run A --run B).")
@click.option("--answer-cost", type=click.FloatRange(0, MAX_CALL_USD), default=None, help="USD per answer call (default: the "
              "runs' mean, from their tokens and --prices).")
@click.option("--judge-cost", type=click.FloatRange(0, MAX_CALL_USD), default=None, help="USD per judge call (default: as above).")
@click.option("--max-answers", type=click.IntRange(1, 20), default=5, show_default=True,
              help="Most answers per case considered.")
@click.option("--max-passes", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Most judge passes per answer considered.")
@click.option("--max-cases", type=click.IntRange(2), default=None,
              help="Cases per benchmark available (default: the runs' dataset's smallest benchmark; none without "
                   "--run).")
@prices_option
@store_option
@format_option
def plan_cmd(target_mdd: float | None, budget: float | None, components_file: str | None, run_ids: tuple[str, ...],
             rho: float | None, answer_cost: float | None, judge_cost: float | None, max_answers: int,
             max_passes: int, max_cases: int | None, prices_file: str | None, store_dir: str | None,
             fmt: str) -> None:
    """Plan the cheapest design (cases, answers per case, judge passes) that detects a difference.

    For every answers-per-case K and judge-passes J up to the limits it finds the fewest cases per
    benchmark whose stratified paired t detects --target-mdd with 80% power, and that design's cost for
    both runs; the cheapest wins. With --budget alone: the design detecting the smallest difference for it.

    --components FILE.json: [{"benchmark": ..., "var_case": ..., "var_answer": ..., "var_judge": ...}, ...]
    (one record per benchmark, or one per run and benchmark with "run_id"), or {"components": [...],
    "rho": 0.5}. The variances are those of ONE case score's parts: between case means, between answers
    within a case, between judge passes within an answer.
    """
    from toolkit.analysis.design import components_from_rows, plan_design

    if target_mdd is None and budget is None:
        raise click.UsageError("give --target-mdd, --budget, or both")
    if components_file is None and not run_ids:
        raise click.UsageError("give --run A --run B (their variance components are estimated from the store) or "
                               "--components FILE.json")
    if run_ids and len(set(run_ids)) != 2:
        raise click.UsageError("give --run twice: the two runs of the comparison to plan")
    fixed: set[str] = set()
    notes: list[str] = []
    if components_file is not None:
        records, file_rho = _read_components(components_file, set(run_ids))
    else:
        records, fixed, notes = _estimated(store_dir, run_ids)
        file_rho = None
    store_facts = _from_runs(store_dir, run_ids, prices_file, records) if run_ids else {}
    from_runs = rho is None and file_rho is None and bool(run_ids)
    chosen_rho: Any = rho if rho is not None else file_rho if file_rho is not None else \
        store_facts.get("rho", {}) if run_ids else None
    if chosen_rho is None:
        raise CommandError(["no between-model correlation: give --rho, a \"rho\" in the components file, or "
                            "--run A --run B"])
    if isinstance(chosen_rho, dict):
        lacking = sorted({str(r["benchmark"]) for r in records} - set(chosen_rho))
        if lacking and not from_runs:
            raise CommandError([f"no between-model correlation in benchmark {lacking[0]!r}: give --rho"])
        if lacking:  # 0 assumes no shared case difficulty: more cases than a positive correlation needs
            chosen_rho = {**dict.fromkeys(lacking, 0.0), **chosen_rho}
            notes.append(f"no between-model correlation from the runs in {', '.join(lacking)} (a run's case scores "
                         "do not vary there, or a variance is 0): planned with rho = 0 there, which asks for more "
                         "cases than a positive correlation would (give --rho to plan with another)")
    answer_cost = answer_cost if answer_cost is not None else store_facts.get("answer_cost")
    judge_cost = judge_cost if judge_cost is not None else store_facts.get("judge_cost")
    if answer_cost is None or judge_cost is None:
        which = "--answer-cost" if answer_cost is None else "--judge-cost"
        raise CommandError([f"no {which.removeprefix('--').replace('-', ' ')} per call: give {which}, or --run A "
                            "--run B with --prices pricing their models (" + store_facts.get("why", "no --run") + ")"])
    plan = plan_design(components_from_rows(records, chosen_rho), answer_cost, judge_cost, target_mdd=target_mdd,
                       budget=budget, max_answers=1 if "answers" in fixed else max_answers,
                       max_passes=1 if "passes" in fixed else max_passes,
                       max_cases=max_cases if max_cases is not None else store_facts.get("max_cases"))
    table = plan.alternatives.select(TABLE_COLUMNS)
    if fmt == "json":
        from toolkit.inputs import dumps

        click.echo(dumps({"notes": notes, "chosen": plan.chosen, "target_mdd": target_mdd, "budget": budget,
                          "answer_cost": answer_cost, "judge_cost": judge_cost, "benchmarks": list(plan.benchmarks),
                          "alternatives": table.to_dicts()}, indent=2))
        return
    if fmt == "csv":
        emit(table, fmt)
        return
    for note in notes:
        say(f"note: {note}", err=True)
    for line in plan.lines():
        say(line)
    say(f"priced at ${answer_cost:.6g} per answer call and ${judge_cost:.6g} per judge call")
    emit(table, fmt, "designs considered (cost of both runs)", optional=("answer_calls", "judge_calls"))


def _read_components(path: str, runs: set[str]) -> tuple[list[dict], Any]:
    """The records and the file's rho (None when absent); CommandError naming the file when unusable."""
    from toolkit.inputs import InputError, parse_json, read_text

    try:  # a regular file of bounded size (never /dev/zero or a FIFO), strict finite JSON
        data = parse_json(read_text(path, COMPONENTS_FILE_LIMIT), path, invalid="not JSON", keys_once=True)
    except InputError as error:
        raise CommandError([str(error)]) from None
    file_rho = None
    if isinstance(data, dict):
        file_rho = data.get("rho")
        data = data.get("components")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise CommandError([f"{path}: expected a list of component records (or {{\"components\": [...]}})"])
    data = [r for r in data if str(r.get("benchmark")).lower() != "overall"]  # the plan is per benchmark
    if runs and any("run_id" in r for r in data):
        data = [r for r in data if r.get("run_id") in runs]
        if not data:
            raise CommandError([f"{path}: no component record of the runs {sorted(runs)}"])
    elif len({r.get("run_id") for r in data}) > 2:
        raise CommandError([f"{path}: components of more than two runs: choose two with --run A --run B"])
    if file_rho is None and all("rho" in r for r in data) and data:
        file_rho = {r["benchmark"]: r["rho"] for r in data}
    return data, file_rho


def _estimated(store_dir: str | None, run_ids: tuple[str, ...]) -> tuple[list[dict], set[str], list[str]]:
    """The two runs' variance components per benchmark, as planner records (``records_from_components``)."""
    from toolkit.analysis.design import records_from_components
    from toolkit.analysis.paired import ResampleSettings
    from toolkit.analysis.variance import VarianceOptions, variance_components
    from toolkit.cli.common import open_store

    # Point estimates only: the fewest resamples the intervals (not used here) accept.
    options = VarianceOptions(resamples=ResampleSettings(samples=1))
    try:
        budget = variance_components(open_store(store_dir), list(dict.fromkeys(run_ids)), options)
    except ValueError as error:
        raise CommandError([str(error)]) from None
    return records_from_components(budget.components)


def _from_runs(store_dir: str | None, run_ids: tuple[str, ...], prices_file: str | None,
               records: list[dict]) -> dict[str, Any]:
    """USD per answer and judge call (mean over both runs), rho of case means per benchmark, cases available."""
    from toolkit.analysis.costs import run_costs, usd_per_call
    from toolkit.analysis.design import case_mean_correlation
    from toolkit.cli.common import open_store
    from toolkit.prices import load_prices
    from toolkit.selection import JudgeSelection, per_case, read_runs

    store = open_store(store_dir)
    run_a, run_b = list(dict.fromkeys(run_ids))
    data = read_runs(store, [run_a, run_b], texts=False)
    out: dict[str, Any] = {}
    for kind, usd in usd_per_call(run_costs(data, load_prices(prices_file))).items():
        if usd is not None:
            out[f"{kind}_cost"] = usd
        else:
            out["why"] = f"the {kind} calls of the runs are not priced"

    def case_var(run: str) -> dict[str, float]:  # a run's own record, else the one record of both runs
        shared = {str(r["benchmark"]): r["var_case"] for r in records if r.get("run_id") is None}
        return {**shared, **{str(r["benchmark"]): r["var_case"] for r in records if r.get("run_id") == run}}

    rho = case_mean_correlation(per_case(data, JudgeSelection()), run_a, run_b, case_var(run_a), case_var(run_b))
    if rho:
        out["rho"] = rho
    sizes = data.cases["benchmark"].value_counts()
    if sizes.height:
        out["max_cases"] = int(sizes["count"].min())
    return out
