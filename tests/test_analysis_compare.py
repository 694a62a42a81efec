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
from toolkit.analysis.compare import CompareOptions, _competition_ranks, compare, compare_matrix
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.paired import ResampleSettings, draw_resamples
from toolkit.analysis.paired_t import paired_t, sign_test_p
from toolkit.analysis.pairs import pairwise
from toolkit.analysis.van_elteren import van_elteren_p
from toolkit.analysis.wilcoxon import wilcoxon_p
from toolkit.cli import main
from toolkit.dataset import load_dataset
from toolkit.selection import JudgeSelection, per_case, read_runs
from toolkit.store import Store


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory: pytest.TempPathFactory, ) -> Store:
    """r0..r3 of rising skill on the sample; r0 judged twice, r3 failed the first case of two benchmarks
    (it keeps 2 of 3 cases there, so it is still ranked)."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("compare") / "store")
    first_two = frozenset(dataset.cases["case_id"].gather([0, 3]).to_list())
    for i in range(4):
        write_run(store, dataset, f"r{i}", skill=0.4 * i, seed=i, created=i, passes=2 if i == 0 else 1,
                  failed=first_two if i == 3 else frozenset())
    return store


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_all_prints_leaderboard_pairs_and_ranks(four_runs: Store, capsys) -> None:
    assert main(["compare", "--all", "--store", str(four_runs.root), "--samples", "300", "--wide"]) == 0
    out = capsys.readouterr().out
    for title in ("leaderboard", "benchmarks", "pairwise", "ranks", "p_holm", "p_bh", "wilcoxon_p", "rank_low", "mdd80"):
        assert title in out or title.replace("_", " ") in out, title  # headers may print _ as a space
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
    # The overall row's rank test is van Elteren's, stratified by benchmark (never the pooled Wilcoxon).
    strata = cases.filter(pl.col("run_id") == "r2")["benchmark"].to_numpy()
    by_benchmark = np.argsort(strata, kind="stable")
    bounds = np.flatnonzero(np.r_[True, strata[by_benchmark][1:] != strata[by_benchmark][:-1], True])
    slices = tuple(slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]))
    assert row["wilcoxon_p"] == pytest.approx(van_elteren_p(d[by_benchmark][None, :], slices)[0], rel=1e-12)
    assert row["wilcoxon_p"] != pytest.approx(stats.wilcoxon(d, zero_method="pratt").pvalue)
    ranks = pl.DataFrame(result["ranks"])
    assert ranks["run_id"].to_list() == ["r3", "r2", "r1", "r0"]
    assert ((ranks["rank_low"] <= ranks["rank_median"]) & (ranks["rank_median"] <= ranks["rank_high"])).all()
    assert ranks["share_first"].sum() == pytest.approx(1.0)


def test_per_benchmark_rows_are_a_family_of_their_own(four_runs: Store, capsys) -> None:
    """Holm/BH of a row depend on its family (the family column), never on what else is displayed."""
    args = ["compare", "--all", "--store", str(four_runs.root), "--samples", "300", "--format", "json",
            "--section", "pairwise"]
    pairs = pl.DataFrame(_json(capsys, *args, "--benchmarks")["pairwise"])
    assert pairs.height == 6 * 11
    assert pairs.group_by("family").len().sort("family").rows() == [("overall", 6), ("per benchmark", 60)]
    detail = pairs.filter(pl.col("family") == "per benchmark")
    p = detail["p_value"].to_numpy()
    smallest = int(np.nanargmin(p))
    assert detail["p_holm"][smallest] == pytest.approx(min(1.0, np.isfinite(p).sum() * p[smallest]))
    alone = pl.DataFrame(_json(capsys, *args)["pairwise"])
    assert alone["family"].unique().to_list() == ["overall"]
    assert pairs.filter(pl.col("family") == "overall").select("run_a", "run_b", "p_holm", "p_bh").equals(
        alone.select("run_a", "run_b", "p_holm", "p_bh"))


def test_seed_fixes_every_number(four_runs: Store, capsys) -> None:
    args = ["compare", "--all", "--store", str(four_runs.root), "--samples", "300", "--format", "json"]
    first = _json(capsys, *args)
    assert _json(capsys, *args) == first
    other = _json(capsys, *args, "--seed", "7")
    # Run intervals are t intervals (no resampling); only the rank intervals rest on the seed.
    assert other["leaderboard"] == first["leaderboard"]
    assert other["ranks"] != first["ranks"]


def test_csv_section_is_plain_csv(four_runs: Store, capsys) -> None:
    assert main(["compare", "--run", "r1", "--run", "r2", "--store", str(four_runs.root), "--samples", "200",
                 "--format", "csv", "--section", "pairwise"]) == 0
    frame = pl.read_csv(capsys.readouterr().out.encode())
    assert frame.height == 1 and frame["run_a"][0] == "r2"


def test_csv_without_section_marks_each_table(four_runs: Store, capsys) -> None:
    assert main(["compare", "--all", "--store", str(four_runs.root), "--samples", "200", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [x for x in lines if x.startswith("# ")] == ["# leaderboard", "# not_ranked", "# benchmarks", "# pairwise",
                                                         "# ranks", "# separability", "# excluded"]
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
    both = compare(four_runs, ["r0"], CompareOptions(resamples=ResampleSettings(100, 1))).leaderboard
    second = compare(four_runs, ["r0"], CompareOptions(resamples=ResampleSettings(100, 1), selection=JudgeSelection(
        passes=(2,)))).leaderboard
    assert both["passes"][0] == "1,2" and second["passes"][0] == "2"
    assert both["overall"][0] != second["overall"][0]
    with pytest.raises(ValueError, match="no completed case"):
        compare(four_runs, ["r0"], CompareOptions(resamples=ResampleSettings(100, 1), selection=JudgeSelection(judge="nobody")))


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


def test_pairwise_equals_a_plain_loop_over_pairs() -> None:
    """Pairs with the same cases and with different cases both match the definition, computed one pair and
    one benchmark at a time: scipy's paired t-test per benchmark, the stratified t over benchmarks."""
    rng = np.random.default_rng(11)
    sizes = {"a": 6, "b": 5, "c": 4}
    scores = rng.random((4, 15)).round(2)
    present = np.ones_like(scores)
    present[1, [0, 7]] = 0  # unit 1 misses a case in a and in b
    present[3, 11:15] = 0  # unit 3 has nothing in benchmark c
    matrix = from_arrays(scores, sizes, present=present)
    first, second = (np.array(side) for side in zip(*combinations(range(4), 2)))
    table = pairwise(matrix, first, second, per_benchmark=True)
    for i, j in zip(first, second):
        means, variances, dfs = [], [], []
        for b, s in enumerate(matrix.slices):
            common = (present[i, s] * present[j, s]) > 0
            if not common.any():
                continue
            a_scores, b_scores = scores[i, s][common], scores[j, s][common]
            d = a_scores - b_scores
            means.append(d.mean())
            variances.append(d.var(ddof=1) / d.size)
            dfs.append(d.size - 1)
            row = table.filter((pl.col("benchmark") == matrix.benchmarks[b]) & (pl.col("run_a") == f"u{i}")
                               & (pl.col("run_b") == f"u{j}")).row(0, named=True)
            ttest = stats.ttest_rel(a_scores, b_scores)
            low, high = ttest.confidence_interval(0.95)
            assert row["delta"] == pytest.approx(d.mean(), abs=1e-12)
            assert row["n_cases"] == d.size and row["df"] == d.size - 1
            assert row["p_value"] == pytest.approx(ttest.pvalue, rel=1e-9)
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-9)
        row = table.filter((pl.col("benchmark") == "overall") & (pl.col("run_a") == f"u{i}")
                           & (pl.col("run_b") == f"u{j}")).row(0, named=True)
        k, v = len(means), np.array(variances)
        se = np.sqrt(v.sum()) / k
        df = v.sum() ** 2 / (v ** 2 / np.array(dfs)).sum()
        half = stats.t.ppf(0.975, df) * se
        assert row["delta"] == pytest.approx(np.mean(means), abs=1e-12)
        assert (row["se"], row["df"]) == pytest.approx((se, df), rel=1e-9)
        assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(np.mean(means)) / se, df), rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((np.mean(means) - half, np.mean(means) + half))
        assert row["mdd80"] == pytest.approx((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se, rel=1e-9)


def test_paired_t_by_hand() -> None:
    cases = np.array([[0.0, 0.5, 1.0, 1.5, 2.0]])  # one benchmark of 5 cases: mean 1, s^2 = 0.625
    t = paired_t(cases)
    se = np.sqrt(0.625 / 5)
    assert (t.delta[0], t.se[0], t.df[0]) == pytest.approx((1.0, se, 4.0))
    assert t.p_value[0] == pytest.approx(2 * stats.t.sf(1.0 / se, 4))
    assert (t.ci_low[0], t.ci_high[0]) == pytest.approx((1 - stats.t.ppf(0.975, 4) * se, 1 + stats.t.ppf(0.975, 4) * se))
    assert paired_t(-cases).p_value[0] == pytest.approx(t.p_value[0])
    # Two benchmarks (3 and 2 cases): the macro mean's variance is sum(s_b^2 / m_b) / B^2; Welch df.
    cases = np.array([[0.1, 0.4, 0.4, -0.2, 0.6]])
    t = paired_t(cases, (slice(0, 3), slice(3, 5)))
    v = np.array([np.var(cases[0, :3], ddof=1) / 3, np.var(cases[0, 3:], ddof=1) / 2])
    assert t.delta[0] == pytest.approx((0.3 + 0.2) / 2)
    assert t.se[0] == pytest.approx(np.sqrt(v.sum()) / 2)
    assert t.df[0] == pytest.approx(v.sum() ** 2 / (v[0] ** 2 / 2 + v[1] ** 2 / 1))
    # Missing cases are left out; fewer than 2 common cases: nothing but delta.
    assert paired_t(np.array([[np.nan, 1.0, 3.0]])).p_value[0] == pytest.approx(stats.ttest_1samp([1, 3], 0).pvalue)
    single = paired_t(np.array([[np.nan, 1.0]]))
    assert single.delta[0] == 1.0 and np.isnan([single.p_value[0], single.ci_low[0], single.se[0]]).all()
    # Far below 2 / (B + 1) of a resampling p: a 435-test family can still be Holm-corrected.
    rng = np.random.default_rng(0)
    assert 0 < paired_t(rng.normal(0.08, 0.2, (1, 400))).p_value[0] < 1e-8


def test_p_value_of_a_difference_that_never_varies_is_a_sign_test() -> None:
    """No resample can differ: not p = 0 (Holm and BH would keep it at 0) but the exact sign test."""
    t = paired_t(np.full((1, 4), 0.5))
    assert t.p_value[0] == pytest.approx(2.0 ** (1 - 4)) and t.se[0] == 0 and np.isnan(t.mdd80[0])
    # No spread: no interval (never a point range labelled 95%), and the note says why.
    assert np.isnan([t.ci_low[0], t.ci_high[0]]).all() and t.ci_note == ["no variation between cases: no interval"]
    t = paired_t(np.full((1, 6), -0.5))
    assert t.p_value[0] == pytest.approx(2.0 ** -5) and np.isnan([t.ci_low[0], t.ci_high[0]]).all()
    one = paired_t(np.array([[0.5, np.nan]]))
    assert np.isnan(one.p_value[0]) and one.ci_note == ["1 case: no interval"]  # one common case
    same = paired_t(np.zeros((1, 4)))
    assert same.p_value[0] == 1.0 and np.isnan([same.ci_low[0], same.ci_high[0]]).all()  # identical runs
    # Constant within each benchmark but in both directions: 3 wins, 2 losses.
    mixed = np.array([[0.5, 0.5, 0.5, -0.25, -0.25]])
    p = paired_t(mixed, (slice(0, 3), slice(3, 5))).p_value[0]
    assert p == pytest.approx(min(1.0, stats.binomtest(2, 5).pvalue)) and p == 1.0
    for wins, losses in ((7, 0), (9, 2), (0, 30), (12, 11), (0, 0)):
        expected = stats.binomtest(min(wins, losses), wins + losses).pvalue if wins + losses else 1.0
        assert sign_test_p(np.array([wins]), np.array([losses]))[0] == pytest.approx(expected, rel=1e-12)
    # Through the engine: a constant difference on every case, and a single common case.
    base = np.random.default_rng(0).random(20)
    table = compare_matrix(from_arrays(np.stack([base + 0.01, base]), {"a": 10, "b": 10}), ResampleSettings(500, 1),
                           per_benchmark=True).pairwise
    assert table["p_value"].to_list() == pytest.approx([2.0 ** -19, 2.0 ** -9, 2.0 ** -9])
    assert table["ci_low"].null_count() == 3 and table["ci_high"].null_count() == 3
    assert table["ci_note"].to_list() == ["no variation between cases: no interval"] * 3
    assert (table["p_holm"] > 0).all() and (table["p_bh"] > 0).all()
    present = np.ones((2, 10))
    present[0, 1:3], present[1, 3:5] = 0, 0  # 3 cases each in benchmark a, one of them common
    table = compare_matrix(from_arrays(np.random.default_rng(1).random((2, 10)), {"a": 5, "b": 5}, present=present),
                           ResampleSettings(500, 1), per_benchmark=True).pairwise
    row = table.filter(pl.col("benchmark") == "a").row(0, named=True)
    assert row["n_cases"] == 1 and row["p_value"] is None and row["p_holm"] is None and row["p_bh"] is None
    overall = table.filter(pl.col("benchmark") == "overall").row(0, named=True)  # b's variance is no help for a
    assert overall["ci_low"] is None and overall["ci_note"] == "1 case in 1 benchmark: no interval"


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


def test_wilcoxon_p_of_a_row_does_not_depend_on_the_other_rows() -> None:
    """Each row's p is scipy's p for that row alone. In one 2-D call scipy picks its method and counts zeros
    and ties over the whole batch: a row without ties (exact distribution alone) batched with tied rows gets
    the normal approximation. Rows cover every branch: exact, permutation (<= 13 cases with ties or zeros),
    normal (ties above 13 cases, or above 50 cases), and rows of different lengths (missing cases)."""
    rng = np.random.default_rng(21)
    rows = []
    for n in (4, 9, 14, 25, 50, 51):
        rows.append(rng.normal(0.3, 1.0, n))  # no zeros, no ties
        rows.append(rng.integers(-4, 5, n) / 4.0)  # rubric-like: ties and zeros
        with_zero = rng.normal(0.2, 1.0, n)
        with_zero[0] = 0.0
        rows.append(with_zero)
        with_tie = rng.normal(0.2, 1.0, n)
        with_tie[1] = -with_tie[0]
        rows.append(with_tie)
    rows.append(rng.integers(-2, 5, 13) / 4.0)  # the largest permutation row (scipy enumerates 8,192 flips)
    rows.append(np.r_[np.zeros(5), rng.integers(1, 3, 6) / 4.0])  # one-sided, many zeros: a small p
    d = np.full((len(rows), 60), np.nan)
    for i, row in enumerate(rows):
        d[i, rng.choice(60, row.size, replace=False)] = row
    alone = np.array([stats.wilcoxon(row, zero_method="pratt").pvalue for row in rows])
    assert wilcoxon_p(d) == pytest.approx(alone, rel=1e-12)
    # The data really does tell the two apart: the 25-case rows batched in one scipy call differ.
    block = np.stack([row for row in rows if row.size == 25])
    batched = stats.wilcoxon(block, axis=1, zero_method="pratt").pvalue
    assert np.abs(batched - alone[[i for i, row in enumerate(rows) if row.size == 25]]).max() > 1e-3
    assert wilcoxon_p(block) == pytest.approx(alone[[i for i, row in enumerate(rows) if row.size == 25]], rel=1e-12)


def test_a_smoke_run_is_not_ranked_and_leaves_the_rank_resamples_whole() -> None:
    """One case per benchmark: listed in not_ranked with the reason; the ranked runs' rank intervals rest on
    every resample, exactly as without it. A ranked run with few cases still says it thins them."""
    from toolkit.analysis.paired import small_sample_note

    rng = np.random.default_rng(2)
    sizes = {"a": 30, "b": 30, "c": 30}
    scores = rng.random((3, 90))
    present = np.ones((3, 90))
    present[2] = 0.0
    present[2, [0, 30, 60]] = 1.0  # a smoke run: one case per benchmark
    result = compare_matrix(from_arrays(scores, sizes, ["full-1", "full-2", "smoke"], present),
                            ResampleSettings(2000, 5))
    full = compare_matrix(from_arrays(scores[:2], sizes, ["full-1", "full-2"]), ResampleSettings(2000, 5))
    means = dict(zip(["full-1", "full-2"], scores[:2].mean(axis=1)))  # equal benchmarks: the macro means
    best_first = sorted(means, key=means.__getitem__, reverse=True)
    assert best_first == ["full-2", "full-1"]  # the seed's draw: the pins below are not a tie's order
    assert result.units["unit"].to_list() == best_first
    assert result.not_ranked.select("unit", "n_benchmarks", "n_cases", "reason").rows() == [
        ("smoke", 3, 3, "1 case in 3 benchmarks")]
    assert result.not_ranked["ci_low"][0] is None and result.not_ranked["ci_note"][0] == \
        "1 case per benchmark: no interval"
    assert result.ranks.equals(full.ranks) and result.ranks["resamples"].to_list() == [2000, 2000]
    assert result.pairwise.select("run_a", "run_b").rows() == [tuple(best_first)]  # the better run first
    assert not any("rank intervals rest on" in n for n in result.notes)
    assert any("1 run(s) not ranked (smoke; see not_ranked)" in n for n in result.notes)
    thin = present.copy()
    thin[2, [1, 31, 61]] = 1.0  # two cases per benchmark: ranked, and every resample draws two of them
    result = compare_matrix(from_arrays(scores, sizes, ["full-1", "full-2", "thin"], thin), ResampleSettings(2000, 5))
    assert result.ranks["resamples"].to_list() == [2000] * 3 and result.not_ranked.height == 0
    assert not any("rank intervals rest on" in n for n in result.notes)
    assert "pairwise" not in small_sample_note(5, paired=False)[0]  # harms has no paired rows to speak of


def test_a_partial_run_keeps_every_rank_resample_and_the_complete_runs_draws() -> None:
    """A run that answered half the cases of each benchmark: each resample draws, in every benchmark, as
    many of its own cases as it has (no resample is left out); the complete runs' resampled means are the
    union draws of a store without it, to the last bit."""
    from toolkit.analysis.case_comparison import rank_resamples, resample_units

    rng = np.random.default_rng(4)
    sizes = {"a": 6, "b": 4, "c": 6}
    scores = rng.random((3, 16))
    present = np.ones((3, 16))
    present[2, [1, 3, 5, 6, 9, 10, 13]] = 0.0  # 3 of 6, 2 of 4, 4 of 6 cases
    matrix = from_arrays(scores, sizes, ["full-1", "full-2", "partial"], present)
    settings = ResampleSettings(2000, 5)
    result = compare_matrix(matrix, settings)
    assert result.ranks["resamples"].to_list() == [2000] * 3
    assert not any("rank intervals rest on" in n for n in result.notes)
    boot = rank_resamples(matrix, settings)
    assert not np.isnan(boot).any()
    union = resample_units(matrix, draw_resamples(matrix.strata, settings), benchmarks=False).overall
    assert np.array_equal(boot[:2], union[:2])
    # The partial run's resampled mean is a mean of 3, 2 and 4 draws of its own cases per benchmark.
    own = [np.flatnonzero(present[2, s]) for s in matrix.slices]
    assert np.allclose(boot[2].mean(), np.mean([scores[2, s][o].mean() for s, o in zip(matrix.slices, own)]),
                       atol=0.01)
    whole = compare_matrix(from_arrays(scores[:2], sizes, ["full-1", "full-2"]), settings)
    alone = rank_resamples(from_arrays(scores[:2], sizes, ["full-1", "full-2"]), settings)
    assert np.array_equal(alone, union[:2]) and whole.ranks["resamples"].to_list() == [2000] * 2


def test_wilcoxon_exact_rows_equal_scipy_bit_for_bit() -> None:
    """Rows of up to 50 cases without zeros and ties take scipy's exact branch: the same double, not
    approximately (the p is a count over 2**n)."""
    rng = np.random.default_rng(11)
    rows = []
    for n in [*range(1, 51), 50, 50, 37, 20, 7]:
        row = np.full(50, np.nan)
        row[:n] = rng.normal(0.05 * rng.integers(-2, 3), 0.2, n)
        rows.append(row)
    d = np.array(rows)
    got = wilcoxon_p(d)
    want = [stats.wilcoxon(row[~np.isnan(row)], zero_method="pratt").pvalue for row in d]
    assert got.tolist() == [float(w) for w in want]
    # the extremes: every difference positive, and a rank sum at the middle
    for row in (np.arange(1, 31) / 100.0, np.array([-1.0, 2.0, -3.0, 4.0, 5.0, -6.0, 0.5])):
        assert wilcoxon_p(row[None, :])[0] == stats.wilcoxon(row, zero_method="pratt").pvalue
