"""``bedside plan`` as a real process: the planner's design from a components file, costs per call from two
stored runs' tokens x prices (by hand here), and one clear line for every missing or bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.test_cli_process import bedside_process
from toolkit.analysis.design import components_from_rows, plan_design
from toolkit.store import Store

RECORDS = [{"benchmark": b, "var_case": 0.04, "var_answer": 0.0225, "var_judge": 0.0025} for b in ("x", "y", "z")]


def _components(tmp_path: Path, body: object) -> str:
    path = tmp_path / "components.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_plan_prints_the_planners_design_and_every_alternative(tmp_path: Path) -> None:
    overall = {"benchmark": "overall", "var_case": 9.0, "var_answer": 9.0, "var_judge": 9.0}  # left out
    path = _components(tmp_path, {"rho": 0.5, "components": [*RECORDS, overall]})
    done = bedside_process(["plan", "--target-mdd", "0.05", "--components", path, "--answer-cost", "0.002",
                            "--judge-cost", "0.004", "--max-cases", "80", "--format", "json"])
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    want = plan_design(components_from_rows(RECORDS, 0.5), 0.002, 0.004, target_mdd=0.05, max_cases=80)
    assert shown["chosen"] == pytest.approx(want.chosen)
    assert len(shown["alternatives"]) == 15 and shown["chosen"]["cases_per_benchmark"] <= 80
    done = bedside_process(["plan", "--budget", "5", "--components", path, "--answer-cost", "0.002",
                            "--judge-cost", "0.004", "--wide"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("smallest difference detectable with 80% power")
    assert "designs considered" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--components", "{c}", "--answer-cost", "1", "--judge-cost", "1"], "give --target-mdd, --budget, or both"),
    (["--target-mdd", "0.05", "--answer-cost", "1", "--judge-cost", "1"], "give --run A --run B"),
    (["--target-mdd", "0.05", "--components", "{c}", "--judge-cost", "1"], "no answer cost per call"),
    (["--target-mdd", "0.05", "--components", "{bad}", "--answer-cost", "1", "--judge-cost", "1"], "not JSON"),
    (["--target-mdd", "0.05", "--components", "{norho}", "--answer-cost", "1", "--judge-cost", "1"],
     "no between-model correlation"),
    (["--target-mdd", "0.05", "--components", "{c}", "--answer-cost", "1", "--judge-cost", "1", "--max-cases", "3"],
     "no design detects a difference of 0.05 within 3 cases per benchmark"),
    (["--target-mdd", "0.05", "--components", "{c}", "--run", "a"], "give --run twice"),
    (["--target-mdd", "0.05", "--components", "/dev/zero", "--answer-cost", "1", "--judge-cost", "1"], "/dev/zero"),
    (["--target-mdd", "0.05", "--components", "{nan}", "--answer-cost", "1", "--judge-cost", "1"], "NaN"),
    (["--target-mdd", "0.05", "--components", "{dup}", "--answer-cost", "1", "--judge-cost", "1"],
     "benchmark 'x' has 2 component records of one run"),
])
def test_missing_or_bad_inputs_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    files = {"c": _components(tmp_path, {"rho": 0.5, "components": RECORDS}), "bad": str(tmp_path / "bad.json"),
             "norho": str(tmp_path / "norho.json"), "nan": str(tmp_path / "nan.json")}
    Path(files["nan"]).write_text('[{"benchmark": "x", "var_case": NaN, "var_answer": 0, "var_judge": 0}]')
    files["dup"] = str(tmp_path / "dup.json")  # two records of x, neither naming its run: not A and B
    Path(files["dup"]).write_text(json.dumps({"rho": 0.5, "components": [RECORDS[0], {**RECORDS[0], "var_case": 0.01}]}))
    Path(files["bad"]).write_text("{not json")
    Path(files["norho"]).write_text(json.dumps(RECORDS))
    done = bedside_process(["plan", *(a.format(**files) for a in args)])
    assert done.returncode != 0 and done.stdout == ""
    # one line says what is wrong
    assert message in done.stderr.strip().splitlines()[-1] and "Traceback" not in done.stderr, done.stderr


def test_two_runs_give_the_cost_per_call_from_their_tokens_and_prices(tmp_path: Path, demo_store: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."sim/*"]\ninput = 1.5\noutput = 6.0\n')
    store = Store.open(demo_store)
    runs = ["sim/strong", "sim/weak"]
    benchmarks = store.read("cases")["benchmark"].unique().to_list()
    records = [{**r, "benchmark": b} for b in benchmarks for r in RECORDS[:1]]
    path = _components(tmp_path, records)
    done = bedside_process(["plan", "--target-mdd", "0.1", "--components", path, "--run", runs[0], "--run", runs[1],
                            "--store", str(demo_store), "--prices", str(prices), "--format", "json",
                            "--max-cases", "1000"])
    # few cases a benchmark: in some a run's scores do not vary, so no correlation comes from the runs there:
    # those are planned with rho = 0, and the output says so
    assert done.returncode == 0, done.stderr
    assert any("planned with rho = 0 there" in n for n in json.loads(done.stdout)["notes"])
    done = bedside_process(["plan", "--target-mdd", "0.1", "--components", path, "--run", runs[0], "--run", runs[1],
                            "--store", str(demo_store), "--prices", str(prices), "--format", "json",
                            "--max-cases", "1000", "--rho", "0.3"])
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)

    def per_call(table: str) -> float:  # every call that replied or reported usage, priced by hand
        rows = store.read(table, runs).filter(pl.col("prompt_tokens").is_not_null() | pl.col("error").is_null())
        usd = (rows["prompt_tokens"].fill_null(0) * 1.5 + rows["completion_tokens"].fill_null(0) * 6.0).sum() / 1e6
        return usd / rows.height

    assert shown["answer_cost"] == pytest.approx(per_call("answers"), rel=1e-12)
    assert shown["judge_cost"] == pytest.approx(per_call("judgments"), rel=1e-12)
    unpriced = bedside_process(["plan", "--target-mdd", "0.1", "--components", path, "--run", runs[0], "--run",
                                runs[1], "--store", str(demo_store), "--prices", str(tmp_path / "none.toml")])
    assert unpriced.returncode != 0 and "none.toml" in unpriced.stderr


def test_two_stored_runs_give_their_variance_components(tmp_path: Path, sample_dataset) -> None:
    """Without --components the two runs' own variance estimates (toolkit.analysis.variance) feed the planner:
    the printed design is the planner's on those records. One judge pass per answer cannot tell the judge
    part from the answer part: the designs keep one pass, and a note says why."""
    from tests.samples_support import sample_decisions, write_samples
    from toolkit.analysis.design import records_from_components
    from toolkit.analysis.paired import ResampleSettings
    from toolkit.analysis.variance import VarianceOptions, variance_components

    root = tmp_path / "s"
    store = Store.open(root)
    for run, seed, passes in (("a", 1, 2), ("b", 2, 1)):
        write_samples(store, sample_dataset, run, sample_decisions(sample_dataset, run, 3, passes=passes, seed=seed))
    args = ["plan", "--target-mdd", "0.2", "--run", "a", "--run", "b", "--store", str(root), "--rho", "0.4",
            "--answer-cost", "0.001", "--judge-cost", "0.002", "--max-cases", "500"]
    done = bedside_process([*args, "--format", "json"])
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    budget = variance_components(store, ["a", "b"], VarianceOptions(resamples=ResampleSettings(samples=1)))
    records, fixed, notes = records_from_components(budget.components)
    assert fixed == {"passes"} and shown["notes"] == notes and any("one judge pass" in n for n in notes)
    want = plan_design(components_from_rows(records, 0.4), 0.001, 0.002, target_mdd=0.2, max_passes=1,
                       max_cases=500)
    assert shown["chosen"] == pytest.approx(want.chosen)
    assert {a["judge_passes"] for a in shown["alternatives"]} == {1}
    assert {a["answers_per_case"] for a in shown["alternatives"]} == set(range(1, 6))
    table = bedside_process(args)
    assert table.returncode == 0 and "note: a run has one judge pass per answer" in table.stderr


def test_subnormal_variances_and_a_huge_budget_plan_and_print_sanely(tmp_path: Path) -> None:
    """Variances of 5e-324 squared to 0 in the t's degrees of freedom (a solver's NaN message); a budget of
    $1e300 printed as a 300-digit amount."""
    tiny = _components(tmp_path, {"rho": 0.5, "components": [
        {"benchmark": b, "var_case": 5e-324, "var_answer": 5e-324, "var_judge": 5e-324} for b in ("x", "y")]})
    for how in (["--target-mdd", "0.05"], ["--budget", "100"]):
        done = bedside_process(["plan", *how, "--components", tiny, "--answer-cost", "1", "--judge-cost", "1",
                                "--format", "json"])
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert json.loads(done.stdout)["chosen"]["cases_per_benchmark"] >= 2
    path = _components(tmp_path, {"rho": 0.5, "components": RECORDS})
    done = bedside_process(["plan", "--budget", "1e300", "--components", path, "--answer-cost", "1",
                            "--judge-cost", "1"])
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "for $1e+300:" in first and len(first) < 250, first


def test_a_budget_past_float_range_and_absurd_costs_and_keys_given_twice_are_one_line(tmp_path: Path) -> None:
    """$1e308 over a cent a call overflowed to an OverflowError; $1e308 a call printed $inf; a key given twice in
    a record took its last value silently (label files refuse that)."""
    path = _components(tmp_path, {"rho": 0.5, "components": RECORDS})
    done = bedside_process(["plan", "--budget", "1e308", "--components", path, "--answer-cost", "0.004",
                            "--judge-cost", "0.002"])
    assert done.returncode == 0 and "internal error" not in done.stderr, done.stderr
    done = bedside_process(["plan", "--target-mdd", "0.1", "--components", path, "--answer-cost", "1e308",
                            "--judge-cost", "1e308"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--answer-cost" in done.stderr, done.stderr
    twice = tmp_path / "twice.json"
    twice.write_text('{"rho": 0.5, "components": [{"benchmark": "a", "var_case": 0.04, "var_case": 0.5, '
                     '"var_answer": 0.01, "var_judge": 0.01}]}', encoding="utf-8")
    done = bedside_process(["plan", "--target-mdd", "0.1", "--components", str(twice), "--answer-cost", "1",
                            "--judge-cost", "1"])
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "given twice" in done.stderr, done.stderr
