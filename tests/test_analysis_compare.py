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
from toolkit.analysis.compare import CompareOptions, _competition_ranks, compare, compare_matrix, resample_units
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.paired import (ResampleSettings, draw_resamples, percentile_interval, sign_test_p,
                                     two_sided_p)
from toolkit.analysis.pairs import pairwise
from toolkit.analysis.wilcoxon import wilcoxon_p
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
        # Case differences on the pair's common cases, NaN elsewhere: what the p-value's corrections use.
        cases = np.where(present[i] * present[j] > 0, scores[i] - scores[j], np.nan)[None, :]
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
            assert row["p_value"] == pytest.approx(two_sided_p(samples[None, :], np.array([observed[-1]]),
                                                               cases[:, s])[0], nan_ok=True)
        overall = np.mean(per_bench, axis=0)
        row = table.filter((pl.col("benchmark") == "overall") & (pl.col("run_a") == f"u{i}")
                           & (pl.col("run_b") == f"u{j}")).row(0, named=True)
        lo, hi = percentile_interval(overall[None, :])
        assert row["delta"] == pytest.approx(np.mean(observed))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]))
        assert row["p_value"] == pytest.approx(two_sided_p(overall[None, :], np.array([np.mean(observed)]), cases,
                                                           matrix.slices)[0])


def test_p_value_definition_by_hand() -> None:
    boot = np.array([[-1.0, 0.0, 1.0, 2.0, 3.0]])  # sd (ddof 1) = sqrt(2.5)
    cases = np.array([[0.0, 0.5, 1.0, 1.5, 2.0]])  # one benchmark of 5 cases: variance inflated by 5 / 4
    z = 1.0 / np.sqrt(2.5 * 5 / 4)
    assert two_sided_p(boot, np.array([1.0]), cases)[0] == pytest.approx(2 * stats.norm.sf(z))
    assert two_sided_p(boot, np.array([-1.0]), -cases)[0] == pytest.approx(2 * stats.norm.sf(z))
    # Two benchmarks (3 and 2 cases): each one's plug-in variance share inflated by m / (m - 1).
    cases = np.array([[0.1, 0.4, 0.4, -0.2, 0.6]])
    strata = (slice(0, 3), slice(3, 5))
    v_a, v_b = np.var(cases[0, :3]) / 3, np.var(cases[0, 3:]) / 2
    factor = (v_a * 3 / 2 + v_b * 2 / 1) / (v_a + v_b)
    assert two_sided_p(boot, np.array([1.0]), cases, strata)[0] == pytest.approx(
        2 * stats.norm.sf(1.0 / np.sqrt(2.5 * factor)))
    assert two_sided_p(np.zeros((1, 9)), np.array([0.0]), np.zeros((1, 4)))[0] == 1.0  # identical runs
    assert two_sided_p(np.array([[np.nan, 1.0, 3.0]]), np.array([2.0]), np.array([[1.0, 3.0]]))[0] == pytest.approx(
        2 * stats.norm.sf(2 / (np.sqrt(2) * np.sqrt(2))))
    assert np.isnan(two_sided_p(np.array([[np.nan, 1.0]]), np.array([1.0]), np.array([[1.0, 3.0]]))[0])
    # Far below 2 / (B + 1): a 435-test family can still be Holm-corrected.
    rng = np.random.default_rng(0)
    tiny = two_sided_p(rng.normal(0.05, 0.01, (1, 10_000)), np.array([0.05]), rng.normal(0.05, 0.2, (1, 400)))[0]
    assert 0 < tiny < 1e-5


def test_p_value_of_a_difference_that_never_varies_is_a_sign_test() -> None:
    """No resample can differ: not p = 0 (Holm and BH would keep it at 0) but the exact sign test."""
    flat = np.full((1, 9), 0.5)
    assert two_sided_p(flat, np.array([0.5]), np.full((1, 4), 0.5))[0] == pytest.approx(2.0 ** (1 - 4))
    assert np.isnan(two_sided_p(flat, np.array([0.5]), np.array([[0.5, np.nan]]))[0])  # one common case
    # Constant within each benchmark but in both directions: 3 wins, 2 losses.
    mixed = np.array([[0.5, 0.5, 0.5, -0.25, -0.25]])
    p = two_sided_p(np.full((1, 9), 0.125), np.array([0.125]), mixed, (slice(0, 3), slice(3, 5)))[0]
    assert p == pytest.approx(min(1.0, stats.binomtest(2, 5).pvalue)) and p == 1.0
    for wins, losses in ((7, 0), (9, 2), (0, 30), (12, 11), (0, 0)):
        expected = stats.binomtest(min(wins, losses), wins + losses).pvalue if wins + losses else 1.0
        assert sign_test_p(np.array([wins]), np.array([losses]))[0] == pytest.approx(expected, rel=1e-12)
    # Through the engine: a constant difference on every case, and a single common case.
    base = np.random.default_rng(0).random(20)
    table = compare_matrix(from_arrays(np.stack([base + 0.01, base]), {"a": 10, "b": 10}), ResampleSettings(500, 1),
                           per_benchmark=True).pairwise
    assert table["p_value"].to_list() == pytest.approx([2.0 ** -19, 2.0 ** -9, 2.0 ** -9])
    assert (table["p_holm"] > 0).all() and (table["p_bh"] > 0).all()
    present = np.ones((2, 10))
    present[1, 1:5] = 0  # one common case in benchmark a
    table = compare_matrix(from_arrays(np.random.default_rng(1).random((2, 10)), {"a": 5, "b": 5}, present=present),
                           ResampleSettings(500, 1), per_benchmark=True).pairwise
    row = table.filter(pl.col("benchmark") == "a").row(0, named=True)
    assert row["n_cases"] == 1 and row["p_value"] is None and row["p_holm"] is None and row["p_bh"] is None


def test_competition_ranks_match_scipy_min_ranks() -> None:
    """numpy ranking (so compare needs no scipy.stats for ranks): 1 = highest, ties share the best rank,
    NaN last (and tied with each other)."""
    rng = np.random.default_rng(4)
    values = rng.integers(0, 6, (200, 9)).astype(float)
    values[rng.random(values.shape) < 0.1] = np.nan
    expected = stats.rankdata(-np.nan_to_num(values, nan=-np.inf), axis=-1, method="min")
    assert np.array_equal(_competition_ranks(values), expected)
    assert _competition_ranks(np.array([0.3, np.nan, 0.9, 0.3])).tolist() == [2, 4, 1, 2]


def test_wilcoxon_normal_approximation_matches_scipy_above_50_cases() -> None:
    """Rows with more than 50 common cases skip scipy (its import is a quarter of a cold compare) and must
    give scipy's number: ties, zeros (Pratt) and missing cases included."""
    rng = np.random.default_rng(8)
    d = rng.integers(-4, 5, (40, 120)) / 4.0
    d[::3] = rng.normal(0.1, 0.3, (14, 120)).round(2)
    d[rng.random(d.shape) < 0.15] = np.nan
    d[5] = np.r_[np.full(68, np.nan), rng.integers(-4, 5, 52) / 4.0]  # 52 common cases: still above 50
    got = wilcoxon_p(d)
    want = [stats.wilcoxon(row[~np.isnan(row)], zero_method="pratt").pvalue for row in d]
    assert got == pytest.approx(want, rel=1e-9)
    assert (~np.isnan(d)).sum(axis=1).min() > 50
