"""``bedside items`` and ``bedside harms`` on stores whose decisions follow known rules, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.analysis_sim import rule_decisions, write_rows, write_run
from toolkit.analysis.harms import harms
from toolkit.analysis.items import ItemOptions, analyse_items
from toolkit.cli import main
from toolkit.dataset import item_id_for, load_dataset
from toolkit.selection import read_runs
from toolkit.store import Store

# Diagnostic case D: +3 A, +1 B, -3 C, 0 D.  Therapeutic case T: +3 E, +2 F, -2 G.  Points case P: +2, -1.
CASES = [
    ("D", "safety_diagnostic", "f1_weighted_rubric", [("A", 3), ("B", 1), ("C", -3), ("D", 0)]),
    ("T", "safety_therapeutic", "f1_weighted_rubric", [("E", 3), ("F", 2), ("G", -2)]),
    ("P", "drug_safety", "points_rubric", [("P+2", 2), ("P-1", -1)]),
]
RULES = {  # run -> which items its answer matches
    "good": pl.col("points") > 0,
    "bad": pl.col("points") < 0,
    "mixed": pl.col("points").abs() == 3,  # +3 and -3 only
}


@pytest.fixture(scope="module")
def hand_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("hand")
    lines = []
    for case_id, benchmark, method, items in CASES:
        prompt = f"prompt of case {case_id}"
        lines.append(json.dumps({"case_id": case_id, "benchmark": benchmark, "grading_method": method,
                                 "prompt": prompt, "split": "test", "rubric_items": [
                                     {"item_id": item_id_for(prompt, i), "text": text, "points": points}
                                     for i, (text, points) in enumerate(items)]}))
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load_dataset(root / "cases.jsonl")
    store = Store.open(root / "store")
    for k, (run_id, rule) in enumerate(RULES.items()):
        write_rows(store, dataset, run_id, rule_decisions(dataset, run_id, rule), created=k)
    return store


def _metrics(frame: pl.DataFrame, run_id: str, scope: str = "both") -> dict[str, float | None]:
    rows = frame.filter((pl.col("run_id") == run_id) & (pl.col("scope") == scope))
    return dict(zip(rows["metric"].to_list(), rows["value"].to_list()))


def test_harms_by_hand(hand_store: Store) -> None:
    frame = harms(read_runs(hand_store, list(RULES)))
    assert set(frame["scope"]) == {"safety_diagnostic", "safety_therapeutic", "both"}  # the points case is not here
    good = _metrics(frame, "good")
    assert good["recall"] == good["precision"] == good["f1"] == 1.0
    assert good["severe_omission_case_rate"] == good["severe_commission_case_rate"] == 0.0
    assert good["omission_share_weighted"] is None  # no error at all: 0 / 0

    bad = _metrics(frame, "bad")
    assert bad["recall"] == 0.0 and bad["precision"] == 0.0 and bad["f1"] == 0.0
    assert bad["severe_omission_case_rate"] == 1.0 and bad["severe_omissions_per_item"] == 1.0
    # T has no -3 item: it cannot have a severe commission, so the rate is over D alone (1 of 1, not 1 of 2).
    assert bad["severe_commission_case_rate"] == 1.0 and bad["severe_commissions_per_item"] == 1.0
    # missed positive weight D 75, T 96; endorsed weight D 72 (C), T 24 (G)
    assert bad["omission_share_weighted"] == pytest.approx(171 / 267)
    assert bad["commission_share_weighted"] == pytest.approx(96 / 267)
    assert bad["omission_share_severe"] == pytest.approx(2 / 3)
    assert bad["severe_rate"] == 1.0

    mixed = _metrics(frame, "mixed")
    # D: matched A(72) C(72) -> recall 72/75, precision 72/144; T: matched E(72) -> recall 72/96, precision 1
    assert mixed["recall"] == pytest.approx((0.96 + 0.75) / 2)
    assert mixed["precision"] == pytest.approx((0.5 + 1.0) / 2)
    assert mixed["omission_share_weighted"] == pytest.approx((3 + 24) / (3 + 24 + 72))
    assert mixed["omission_share_severe"] == 0.0
    assert _metrics(frame, "mixed", "safety_therapeutic")["recall"] == pytest.approx(0.75)
    assert _metrics(frame, "bad", "safety_diagnostic")["severe_commission_case_rate"] == 1.0
    assert (frame["n_cases"] <= 2).all()
    rows = frame.filter((pl.col("run_id") == "bad") & (pl.col("scope") == "both"))
    n = dict(zip(rows["metric"].to_list(), rows.select("n_cases", "denominator").rows()))
    assert n["severe_commission_case_rate"] == (1, 1.0) and n["severe_omission_case_rate"] == (2, 2.0)
    assert n["severe_omissions_per_item"] == (2, 2.0) and n["severe_rate"] == (2, 2.0)
    within = frame.filter(pl.col("value").is_not_null() & pl.col("ci_low").is_not_null())
    assert ((within["ci_low"] <= within["value"] + 1e-12) & (within["value"] <= within["ci_high"] + 1e-12)).all()


# Severe event denominators: S1 has +3 and -3, S2 only +3, S3 only -3, S4 neither (and a therapeutic case).
SEVERE_CASES = [
    ("S1", "safety_diagnostic", [("a", 3), ("b", -3), ("c", 1)]),
    ("S2", "safety_diagnostic", [("d", 3), ("e", 2)]),
    ("S3", "safety_diagnostic", [("f", 2), ("g", -3)]),
    ("S4", "safety_diagnostic", [("h", 1), ("i", -1)]),
    ("S5", "safety_therapeutic", [("j", 3), ("k", -3)]),
]


def test_severe_case_rates_count_only_cases_that_can_have_the_event(tmp_path: Path) -> None:
    lines = []
    for case_id, benchmark, items in SEVERE_CASES:
        prompt = f"prompt of case {case_id}"
        lines.append(json.dumps({"case_id": case_id, "benchmark": benchmark, "grading_method": "f1_weighted_rubric",
                                 "prompt": prompt, "split": "test", "rubric_items": [
                                     {"item_id": item_id_for(prompt, i), "text": text, "points": points}
                                     for i, (text, points) in enumerate(items)]}))
    (tmp_path / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load_dataset(tmp_path / "cases.jsonl")
    store = Store.open(tmp_path / "store")
    # "careless" matches nothing but the -3 items: it misses every +3 item and endorses every -3 item.
    # "half" matches items a, d (the +3 of S1 and S2) and g (the -3 of S3).
    write_rows(store, dataset, "careless", rule_decisions(dataset, "careless", pl.col("points") == -3))
    write_rows(store, dataset, "half", rule_decisions(dataset, "half", pl.col("text").is_in(["a", "d", "g"])),
               created=1)
    frame = harms(read_runs(store, ["careless", "half"]))

    def row(run: str, scope: str, metric: str) -> dict:
        return frame.filter((pl.col("run_id") == run) & (pl.col("scope") == scope)
                            & (pl.col("metric") == metric)).row(0, named=True)

    # Plain recomputation: the eligible cases of the diagnostic benchmark, and their events.
    plus3 = {c for c, _, items in SEVERE_CASES if any(p == 3 for _, p in items)}
    minus3 = {c for c, _, items in SEVERE_CASES if any(p == -3 for _, p in items)}
    diagnostic = {c for c, b, _ in SEVERE_CASES if b == "safety_diagnostic"}
    assert (len(plus3 & diagnostic), len(minus3 & diagnostic)) == (2, 2)
    careless = row("careless", "safety_diagnostic", "severe_omission_case_rate")
    assert (careless["value"], careless["n_cases"], careless["denominator"]) == (1.0, 2, 2.0)  # not 2 of 4
    careless = row("careless", "safety_diagnostic", "severe_commission_case_rate")
    assert (careless["value"], careless["n_cases"], careless["denominator"]) == (1.0, 2, 2.0)
    assert row("careless", "safety_diagnostic", "severe_rate")["value"] == 0.75  # protocol: over all 4 cases
    # half: S1 and S2 keep their +3 item (no omission), S3 endorses its -3, S1 does not.
    assert row("half", "safety_diagnostic", "severe_omission_case_rate")["value"] == 0.0
    assert row("half", "safety_diagnostic", "severe_commission_case_rate")["value"] == 0.5
    # Pooled over both benchmarks: S5 joins both denominators (it misses j and does not endorse k).
    both = row("half", "both", "severe_omission_case_rate")
    assert (both["value"], both["n_cases"]) == (pytest.approx(1 / 3), 3)
    both = row("half", "both", "severe_commission_case_rate")
    assert (both["value"], both["n_cases"], both["denominator"]) == (pytest.approx(1 / 3), 3, 3.0)
    per_item = row("half", "both", "severe_omissions_per_item")
    assert (per_item["value"], per_item["denominator"]) == (pytest.approx(1 / 3), 3.0)  # j of a, d, j
    # An interval, or none with the reason: a rate every resample gives alike is no 95% interval.
    valued = frame.filter(pl.col("value").is_not_null())
    assert valued.filter(pl.col("ci_low").is_null() != pl.col("ci_note").is_not_null()).height == 0
    with_interval = valued.filter(pl.col("ci_low").is_not_null())
    assert (with_interval["ci_low"] < with_interval["ci_high"]).all()
    careless = row("careless", "safety_diagnostic", "severe_omission_case_rate")  # both cases have the event
    assert (careless["ci_low"], careless["ci_note"]) == (None, "no variation between cases: no interval")


def test_items_by_hand(hand_store: Store) -> None:
    result = analyse_items(read_runs(hand_store, list(RULES)), ItemOptions(top=3))
    items = result.items
    rate = dict(zip(items["text"].to_list(), items["match_rate"].to_list()))
    assert rate == pytest.approx({"A": 2 / 3, "B": 1 / 3, "C": 2 / 3, "D": 0.0, "E": 2 / 3, "F": 1 / 3,
                                  "G": 1 / 3, "P+2": 1 / 3, "P-1": 1 / 3})
    assert result.missed["miss_rate"].to_list() == pytest.approx([2 / 3] * 3)
    assert result.missed["text"].to_list()[2] == "B"  # among equal miss rates, heavier items first
    assert result.endorsed["text"][0] == "C" and (result.endorsed["points"] < 0).all()
    # Discrimination of A: matched (good 1, bad 0, mixed 1) against the runs' overall scores.
    mixed_f1 = [2 * 0.5 * 0.96 / 1.46, 2 * 0.75 / 1.75]  # D and T F1; P matches nothing and scores 0
    board = {"good": 1.0, "bad": 0.0, "mixed": (round(mixed_f1[0], 4) + round(mixed_f1[1], 4) + 0.0) / 3}
    expected = np.corrcoef([1, 0, 1], [board["good"], board["bad"], board["mixed"]])[0, 1]
    assert items.filter(pl.col("text") == "A")["discrimination"][0] == pytest.approx(expected)
    by_points = result.by_points.filter(pl.col("run_id") == "bad")
    assert dict(zip(by_points["points"].to_list(), by_points["match_rate"].to_list())) == {
        3.0: 0.0, 2.0: 0.0, 1.0: 0.0, 0.0: 0.0, -1.0: 1.0, -2.0: 1.0, -3.0: 1.0}
    runs = result.runs.filter(pl.col("run_id") == "mixed")
    assert dict(zip(runs["rate"].to_list(), runs["share"].to_list())) == pytest.approx(
        {"positive_matched": 2 / 5, "negative_endorsed": 1 / 3})


def test_items_cli_on_simulated_runs(tmp_path: Path, capsys) -> None:
    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    for i in range(4):
        write_run(store, dataset, f"s{i}", skill=0.5 * i, seed=i, created=i, passes=2 if i == 1 else 1)
    args = ["items", "--all", "--store", str(store.root), "--format", "json", "--ci", "--samples", "300"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    items = pl.DataFrame(out["items"], infer_schema_length=None)
    assert items.height == dataset.rubric_items.height
    # s1 was judged twice: its rate on an item is the mean of its two passes.
    per_run = store.read("decisions").group_by("run_id", "item_id").agg(pl.col("matched").cast(pl.Float64).mean())
    direct = per_run.group_by("item_id").agg(pl.col("matched").mean()).sort("item_id")
    joined = items.select("item_id", "match_rate").sort("item_id").join(direct, on="item_id")
    assert np.allclose(joined["match_rate"], joined["matched"])
    assert len(out["missed"]) == 10 and all(r["points"] > 0 for r in out["missed"])
    assert all(r["ci_low"] <= r["match_rate"] <= r["ci_high"] for r in out["missed"])
    by_points = pl.DataFrame(out["by_points"], infer_schema_length=None)
    assert "(all runs)" in by_points["run_id"].to_list()
    assert ((by_points["ci_low"] <= by_points["match_rate"] + 1e-12)
            & (by_points["match_rate"] <= by_points["ci_high"] + 1e-12)).all()
    assert "item_runs" not in out  # one row per run x item only when asked for
    assert main(["items", "--all", "--store", str(store.root), "--section", "item_runs", "--format", "csv"]) == 0
    item_runs = pl.read_csv(capsys.readouterr().out.encode())
    assert item_runs.height == 4 * dataset.rubric_items.height
    assert item_runs.filter(pl.col("run_id") == "s1")["passes"].unique().to_list() == [2]
    assert main(["items", "--all", "--store", str(store.root), "--benchmark", "drug_safety", "--top", "2"]) == 0
    table = capsys.readouterr().out
    assert "missed" in table and "guideline_adherence" not in table
    assert main(["items", "--all", "--store", str(store.root), "--benchmark", "nope"]) == 1
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


def test_harms_cli(tmp_path: Path, capsys) -> None:
    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    write_run(store, dataset, "a", skill=0.2, seed=1)
    write_run(store, dataset, "b", skill=0.8, seed=2, created=1)
    assert main(["harms", "--all", "--store", str(store.root), "--samples", "300", "--format", "csv"]) == 0
    frame = pl.read_csv(capsys.readouterr().out.encode())
    assert frame.height == 2 * 3 * 11
    assert set(frame.columns) >= {"run_id", "scope", "metric", "value", "ci_low", "ci_high", "n_cases", "denominator"}
    rates = frame.filter(pl.col("metric").str.ends_with("case_rate"))
    assert (rates["denominator"] == rates["n_cases"]).all()  # a case rate divides by its eligible cases
    assert main(["harms", "--all", "--store", str(store.root), "--samples", "300"]) == 0
    table, notes = capsys.readouterr()
    assert "harms" in table and "safety_the" in table
    assert "cases with at least one +3 (-3) item" in notes  # the denominator note, after the tables on stderr
    only_points = Store.open(tmp_path / "points")
    write_rows(only_points, dataset, "p", rule_decisions(dataset, "p", pl.col("points") > 0,
                                                          benchmarks=("drug_safety",)))
    assert main(["harms", "--all", "--store", str(only_points.root)]) == 1
    assert "no completed f1_weighted_rubric case" in capsys.readouterr().err


def test_item_summary_does_not_depend_on_the_order_of_its_rows() -> None:
    from toolkit.analysis.items import item_summary, run_overall

    rng = np.random.default_rng(4)
    runs, items = [f"r{i}" for i in range(9)], [f"i{k}" for k in range(40)]
    cases = pl.DataFrame({"run_id": np.repeat(runs, 30), "benchmark": np.tile(np.repeat(["a", "b", "c"], 10), 9),
                          "case_id": np.tile([f"c{k}" for k in range(30)], 9), "score": rng.random(270) / 3})
    rates = pl.DataFrame({
        "run_id": np.repeat(runs, len(items)), "item_id": np.tile(items, len(runs)),
        "case_id": np.tile([f"c{k % 30}" for k in range(len(items))], len(runs)), "benchmark": "a",
        "grading_method": "points_rubric", "points": 1.0, "severity_class": None, "text": "t",
        "matched": rng.random(len(runs) * len(items)) / 7})
    expected = item_summary(rates, run_overall(cases))
    for seed in range(6):
        shuffled = item_summary(rates.sample(fraction=1.0, shuffle=True, seed=seed),
                                run_overall(cases.sample(fraction=1.0, shuffle=True, seed=seed)))
        assert shuffled.equals(expected)  # bit for bit: sums in one order whatever the row order


def test_ratio_intervals_do_not_depend_on_the_order_of_the_rows() -> None:
    """The same cases in another row order give the same bits: a group's resampled sums are matrix products,
    whose rounding depends on the row a group lands in, so the groups' rows keep one order. (harms once
    printed a different last digit on every run: its cases came from an unordered group_by.)"""
    import numpy as np

    from toolkit.analysis.paired import ResampleSettings
    from toolkit.analysis.ratios import case_ratios

    rng = np.random.default_rng(0)
    frame = pl.DataFrame([{"run_id": f"r{r:02d}", "metric": "m", "benchmark": f"b{b}", "case_id": f"c{b}-{c}",
                           "num": float(rng.random()), "den": 1.0}
                          for r in range(30) for b in range(3) for c in range(50)])
    want = case_ratios(frame, ["run_id", "metric"], ResampleSettings(samples=2000))
    for seed in range(3):
        got = case_ratios(frame.sample(fraction=1.0, shuffle=True, seed=seed), ["run_id", "metric"],
                          ResampleSettings(samples=2000))
        assert got["run_id"].to_list() == frame.sample(fraction=1.0, shuffle=True, seed=seed)["run_id"].unique(
            maintain_order=True).to_list()  # groups keep their first-appearance order
        assert got.sort("run_id").equals(want.sort("run_id"))
