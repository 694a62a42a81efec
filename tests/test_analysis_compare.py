"""``bedside compare`` and the comparison engine on real stores of simulated runs."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tests.analysis_sim import write_run
from toolkit.analysis.compare import CompareOptions, compare, resample_units
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.paired import ResampleSettings, draw_resamples, percentile_interval, two_sided_p
from toolkit.analysis.pairs import pairwise
from toolkit.cli import main
from toolkit.dataset import load_dataset
from toolkit.selection import JudgeSelection, per_case, read_runs
from toolkit.store import Store


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory: pytest.TempPathFactory, ) -> Store:
    """r0..r3 of rising skill on the sample; r0 judged twice, r3 failed its first two cases."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("compare") / "store")
    first_two = frozenset(dataset.cases["case_id"].to_list()[:2])
    for i in range(4):
        write_run(store, dataset, f"r{i}", skill=0.4 * i, seed=i, created=i, passes=2 if i == 0 else 1,
                  failed=first_two if i == 3 else frozenset())
    return store


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_all_prints_leaderboard_pairs_and_ranks(four_runs: Store, capsys) -> None:
    assert main(["compare", "--all", "--store", str(four_runs.root), "--samples", "300"]) == 0
    out = capsys.readouterr().out
    for title in ("leaderboard", "benchmarks", "pairwise", "ranks", "p_holm", "p_bh", "wilcoxon_p", "rank_low"):
        assert title in out
    assert "excluded" not in out  # nothing was left out


def test_leaderboard_numbers(four_runs: Store, capsys) -> None:
    result = _json(capsys, "compare", "--all", "--store", str(four_runs.root), "--samples", "500", "--format", "json")
    board = pl.DataFrame(result["leaderboard"])
    assert board["run_id"].to_list() == ["r3", "r2", "r1", "r0"]  # best first
    assert board["rank"].to_list() == [1, 2, 3, 4]
    cases = per_case(read_runs(four_runs, ["r0", "r1", "r2", "r3"]), JudgeSelection())
    expected = cases.group_by("run_id", "benchmark").agg(pl.col("score").mean()).group_by("run_id").agg(
        pl.col("score").mean())
    for row in board.iter_rows(named=True):
        want = expected.filter(pl.col("run_id") == row["run_id"])["score"][0]
        assert row["overall"] == pytest.approx(want, abs=1e-12)
        assert row["ci_low"] < row["overall"] < row["ci_high"]
    r3, r0 = board.row(0, named=True), board.row(3, named=True)
    assert (r3["completed"], r3["failed"], r3["passes"]) == (28, 2, "1")
    assert (r0["completed"], r0["failed"], r0["passes"]) == (30, 0, "1,2")
    assert board["judge_model"].unique().to_list() == ["judge-x"]
    assert board["dataset_sha256"].unique().to_list() == [load_dataset().sha256]
    benchmarks = pl.DataFrame(result["benchmarks"])
    assert benchmarks.height == 40 and benchmarks.filter(pl.col("run_id") == "r3")["n"].sum() == 28


def test_pairwise_table(four_runs: Store, capsys) -> None:
    result = _json(capsys, "compare", "--all", "--store", str(four_runs.root), "--samples", "500", "--format", "json")
    pairs = pl.DataFrame(result["pairwise"])
    assert pairs.height == 6 and set(pairs["benchmark"]) == {"overall"}
    assert [tuple(r) for r in pairs.select("run_a", "run_b").rows()] == list(combinations(["r3", "r2", "r1", "r0"], 2))
    assert (pairs["p_holm"] >= pairs["p_value"] - 1e-15).all() and (pairs["p_bh"] <= pairs["p_holm"] + 1e-15).all()
    # r3 lacks two cases: its pairs use the 28 common cases, the others all 30.
    assert pairs.filter(pl.col("run_a") == "r3")["n_cases"].to_list() == [28, 28, 28]
    assert pairs.filter(pl.col("run_a") != "r3")["n_cases"].to_list() == [30, 30, 30]
    assert ((pairs["wins"] + pairs["ties"] + pairs["losses"]) == pairs["n_cases"]).all()
    # Win/tie/loss and Wilcoxon by hand for r2 vs r1 (same cases).
    cases = per_case(read_runs(four_runs, ["r1", "r2"]), JudgeSelection()).sort("run_id", "position")
    a = cases.filter(pl.col("run_id") == "r2")["score"].to_numpy()
    b = cases.filter(pl.col("run_id") == "r1")["score"].to_numpy()
    row = pairs.filter((pl.col("run_a") == "r2") & (pl.col("run_b") == "r1")).row(0, named=True)
    d = np.where(np.abs(a - b) <= 1e-12, 0.0, a - b)
    assert (row["wins"], row["ties"], row["losses"]) == ((d > 0).sum(), (d == 0).sum(), (d < 0).sum())
    assert row["wilcoxon_p"] == pytest.approx(stats.wilcoxon(d, zero_method="pratt").pvalue)
    ranks = pl.DataFrame(result["ranks"])
    assert ranks["run_id"].to_list() == ["r3", "r2", "r1", "r0"]
    assert ((ranks["rank_low"] <= ranks["rank_median"]) & (ranks["rank_median"] <= ranks["rank_high"])).all()
    assert ranks["share_first"].sum() == pytest.approx(1.0)


def test_per_benchmark_rows_join_the_family(four_runs: Store, capsys) -> None:
    result = _json(capsys, "compare", "--all", "--store", str(four_runs.root), "--samples", "300", "--format",
                   "json", "--benchmarks", "--section", "pairwise")
    pairs = pl.DataFrame(result["pairwise"])
    assert pairs.height == 6 * 11
    p = pairs["p_value"].to_numpy()
    m = np.isfinite(p).sum()
    smallest = int(np.nanargmin(p))
    assert pairs["p_holm"][smallest] == pytest.approx(min(1.0, m * p[smallest]))


def test_seed_fixes_every_number(four_runs: Store, capsys) -> None:
    args = ["compare", "--all", "--store", str(four_runs.root), "--samples", "300", "--format", "json"]
    first = _json(capsys, *args)
    assert _json(capsys, *args) == first
    other = _json(capsys, *args, "--seed", "7")
    assert other["leaderboard"][0]["overall"] == first["leaderboard"][0]["overall"]
    assert other["leaderboard"][0]["ci_low"] != first["leaderboard"][0]["ci_low"]


def test_csv_section_is_plain_csv(four_runs: Store, capsys) -> None:
    assert main(["compare", "--run", "r1", "--run", "r2", "--store", str(four_runs.root), "--samples", "200",
                 "--format", "csv", "--section", "pairwise"]) == 0
    frame = pl.read_csv(capsys.readouterr().out.encode())
    assert frame.height == 1 and frame["run_a"][0] == "r2"


def test_csv_without_section_marks_each_table(four_runs: Store, capsys) -> None:
    assert main(["compare", "--all", "--store", str(four_runs.root), "--samples", "200", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [x for x in lines if x.startswith("# ")] == ["# leaderboard", "# benchmarks", "# pairwise", "# ranks",
                                                         "# excluded"]
    assert "paired resamples" in captured.err  # notes go to stderr, so the CSV stays clean


def test_mixed_datasets_and_judges_are_left_out_unless_allowed(tmp_path: Path, capsys) -> None:
    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    for i in range(3):
        write_run(store, dataset, f"same{i}", skill=0.3 * i, seed=i, created=i)
    write_run(store, dataset, "other-judge", skill=0.1, seed=9, created=5, judge="judge-z")
    subset = tmp_path / "subset.jsonl"  # another dataset: the sample without its last case
    subset.write_text("".join(json.dumps(c) + "\n" for c in dataset.raw_cases[:-1]), encoding="utf-8")
    write_run(store, load_dataset(subset), "other-data", skill=0.2, seed=8, created=6)
    result = _json(capsys, "compare", "--all", "--store", str(store.root), "--samples", "200", "--format", "json")
    assert [r["run_id"] for r in result["leaderboard"]] == ["same2", "same1", "same0"]
    reasons = {r["run_id"]: r["reason"] for r in result["excluded"]}
    assert set(reasons) == {"other-judge", "other-data"}
    assert "judge judge-z differs from judge-x" == reasons["other-judge"]
    assert reasons["other-data"].startswith("dataset ")
    assert any("left out" in note for note in result["notes"])
    mixed = _json(capsys, "compare", "--all", "--store", str(store.root), "--samples", "200", "--format", "json",
                  "--allow-mixed")
    assert len(mixed["leaderboard"]) == 5 and mixed["excluded"] == []
    assert any(n.startswith("mixed datasets (2)") for n in mixed["notes"])
    assert any(n.startswith("mixed judges (2)") for n in mixed["notes"])
    pairs = pl.DataFrame(mixed["pairwise"])
    assert pairs.filter((pl.col("run_a") == "other-data") | (pl.col("run_b") == "other-data"))["n_cases"].unique(
    ).to_list() == [29]


def test_judge_and_pass_selection(four_runs: Store) -> None:
    both = compare(four_runs, ["r0"], CompareOptions(ResampleSettings(100, 1))).leaderboard
    second = compare(four_runs, ["r0"], CompareOptions(ResampleSettings(100, 1), selection=JudgeSelection(
        passes=(2,)))).leaderboard
    assert both["passes"][0] == "1,2" and second["passes"][0] == "2"
    assert both["overall"][0] != second["overall"][0]
    with pytest.raises(ValueError, match="no completed case"):
        compare(four_runs, ["r0"], CompareOptions(ResampleSettings(100, 1), selection=JudgeSelection(judge="nobody")))


def test_cli_errors_are_one_line(four_runs: Store, capsys) -> None:
    assert main(["compare", "--run", "nope", "--store", str(four_runs.root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run 'nope'" in err[0]
    assert main(["compare", "--store", str(four_runs.root)]) == 2
    assert main(["compare", "--all", "--store", str(four_runs.root), "--samples", "0"]) == 1
    assert "samples must be" in capsys.readouterr().err


# -- the vectorised engine against a plain loop ---------------------------------------------------------

def test_shared_resamples_draw_whole_strata() -> None:
    res = draw_resamples([("a", 7), ("b", 3)], ResampleSettings(500, 3))
    assert res.counts[0].shape == (7, 500) and res.counts[1].shape == (3, 500)
    assert (res.counts[0].sum(axis=0) == 7).all() and (res.counts[1].sum(axis=0) == 3).all()
    assert abs(res.counts[0].mean() - 1.0) < 0.05
    again = draw_resamples([("a", 7), ("b", 3)], ResampleSettings(500, 3))
    assert all(np.array_equal(x, y) for x, y in zip(res.counts, again.counts))


def test_pairwise_equals_a_plain_loop_over_pairs_and_resamples() -> None:
    """Broadcast pairs (same cases) and ratio pairs (different cases) both match the definition."""
    rng = np.random.default_rng(11)
    sizes = {"a": 6, "b": 5, "c": 4}
    scores = rng.random((4, 15)).round(2)
    present = np.ones_like(scores)
    present[1, [0, 7]] = 0  # unit 1 misses a case in a and in b
    present[3, 11:15] = 0  # unit 3 has nothing in benchmark c
    matrix = from_arrays(scores, sizes, present=present)
    res = matrix.resamples(ResampleSettings(200, 5))
    boot = resample_units(matrix, res)
    first, second = (np.array(side) for side in zip(*combinations(range(4), 2)))
    table = pairwise(matrix, res, boot.benchmark, boot.overall, first, second, per_benchmark=True)
    for k, (i, j) in enumerate(zip(first, second)):
        per_bench, observed = [], []
        for b, s in enumerate(matrix.slices):
            common = present[i, s] * present[j, s]
            if common.sum() == 0:
                continue
            diff = (scores[i, s] - scores[j, s]) * common
            samples = np.array([(c * diff).sum() / (c * common).sum() if (c * common).sum() else np.nan
                                for c in res.counts[b].T])
            per_bench.append(samples)
            observed.append(diff.sum() / common.sum())
            row = table.filter((pl.col("benchmark") == matrix.benchmarks[b]) & (pl.col("run_a") == f"u{i}")
                               & (pl.col("run_b") == f"u{j}")).row(0, named=True)
            lo, hi = percentile_interval(samples[None, :])
            assert row["delta"] == pytest.approx(observed[-1])
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]))
            assert row["p_value"] == pytest.approx(two_sided_p(samples[None, :], np.array([observed[-1]]))[0])
        overall = np.mean(per_bench, axis=0)
        row = table.filter((pl.col("benchmark") == "overall") & (pl.col("run_a") == f"u{i}")
                           & (pl.col("run_b") == f"u{j}")).row(0, named=True)
        lo, hi = percentile_interval(overall[None, :])
        assert row["delta"] == pytest.approx(np.mean(observed))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]))
        assert row["p_value"] == pytest.approx(two_sided_p(overall[None, :], np.array([np.mean(observed)]))[0])


def test_p_value_definition_by_hand() -> None:
    boot = np.array([[-1.0, 0.0, 1.0, 2.0, 3.0]])  # sd (ddof 1) = sqrt(2.5)
    z = 1.0 / np.sqrt(2.5)
    assert two_sided_p(boot, np.array([1.0]))[0] == pytest.approx(2 * stats.norm.sf(z))
    assert two_sided_p(boot, np.array([-1.0]))[0] == pytest.approx(2 * stats.norm.sf(z))
    assert two_sided_p(np.zeros((1, 9)), np.array([0.0]))[0] == 1.0  # identical runs
    assert two_sided_p(np.full((1, 9), 0.5), np.array([0.5]))[0] == 0.0  # a difference that never varies
    assert two_sided_p(np.array([[np.nan, 1.0, 3.0]]), np.array([2.0]))[0] == pytest.approx(2 * stats.norm.sf(
        2 / np.sqrt(2)))
    assert np.isnan(two_sided_p(np.array([[np.nan, 1.0]]), np.array([1.0]))[0])
    # Far below 2 / (B + 1): a 435-test family can still be Holm-corrected.
    tiny = two_sided_p(np.random.default_rng(0).normal(0.05, 0.01, (1, 10_000)), np.array([0.05]))[0]
    assert 0 < tiny < 1e-5
