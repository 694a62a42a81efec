"""A comparison that never contradicts itself: one baseline and one Holm family, like-for-like ranking, no
point range shown as an interval, tie groups, the versus view, and the same means as ``summary``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.analysis_sim import simulate_decisions, write_rows, write_run
from tests.test_cli_process import bedside_process
from toolkit.analysis import CompareOptions, ResampleSettings, compare, compare_data, compare_matrix, from_arrays
from toolkit.analysis.multiplicity import holm
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.van_elteren import van_elteren_p
from toolkit.analysis.wilcoxon import wilcoxon_p
from toolkit.dataset import load_dataset
from toolkit.selection import JudgeSelection, per_case, read_runs
from toolkit.store import Store

SAMPLES = 400
INTERVALS = ("leaderboard", "not_ranked", "benchmarks", "pairwise", "versus")


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two complete runs, a smoke run (one case per benchmark) and a run covering 2 of 10 benchmarks."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("honest") / "store")
    write_run(store, dataset, "strong", skill=1.5, seed=1, created=0)
    write_run(store, dataset, "weak", skill=-0.5, seed=2, created=1)
    first = dataset.cases.group_by("benchmark", maintain_order=True).first()["case_id"].to_list()
    smoke = simulate_decisions(dataset, "smoke", skill=0.0, seed=3).filter(pl.col("case_id").is_in(first))
    write_rows(store, dataset, "smoke", smoke, created=2)
    two = dataset.cases.filter(pl.col("benchmark").is_in(["drug_safety", "landmark_trials"]))["case_id"].to_list()
    partial = simulate_decisions(dataset, "partial", skill=3.0, seed=4).filter(pl.col("case_id").is_in(two))
    write_rows(store, dataset, "partial", partial, created=3)
    return store


def _compare_json(store: Store, *extra: str) -> dict:
    done = bedside_process(["compare", "--all", "--store", str(store.root), "--samples", str(SAMPLES),
                            "--format", "json", *extra])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _no_point_intervals(section: list[dict]) -> None:
    for row in section:
        if row["ci_low"] is None or row["ci_high"] is None:
            assert row["ci_low"] is None and row["ci_high"] is None and row["ci_note"], row
        else:
            assert row["ci_low"] < row["ci_high"] and row["ci_note"] is None, row


def test_acceptance_only_complete_runs_are_ranked_on_every_resample(mixed_store: Store) -> None:
    out = _compare_json(mixed_store)
    assert [r["run_id"] for r in out["leaderboard"]] == ["strong", "weak"]
    assert [r["rank"] for r in out["leaderboard"]] == [1, 2]
    reasons = {r["run_id"]: r["reason"] for r in out["not_ranked"]}
    assert reasons == {"smoke": "1 case in 10 benchmarks", "partial": "covers 2 of 10 benchmarks"}
    partial = next(r for r in out["not_ranked"] if r["run_id"] == "partial")
    assert (partial["n_benchmarks"], partial["completed"]) == (2, 6) and partial["ci_low"] is not None
    assert [r["resamples"] for r in out["ranks"]] == [SAMPLES, SAMPLES]
    assert {(r["run_a"], r["run_b"]) for r in out["pairwise"]} == {("strong", "weak")}
    assert "versus" not in out  # the per-benchmark rows against the leader come with --benchmarks
    wide = _compare_json(mixed_store, "--benchmarks")
    assert {r["run_id"] for r in wide["versus"]} == {"weak"}
    for name in INTERVALS:
        _no_point_intervals(wide[name])
    smoke = next(r for r in out["not_ranked"] if r["run_id"] == "smoke")
    assert smoke["ci_note"] == "1 case per benchmark: no interval"
    assert any("2 run(s) not ranked" in n for n in out["notes"])
    assert all("\n" not in n for n in out["notes"])  # one line each
    overall = [r for r in wide["pairwise"] if r["family"] == "overall"]
    assert [(r["run_a"], r["run_b"], r["p_holm"], r["p_bh"]) for r in overall] == \
        [(r["run_a"], r["run_b"], r["p_holm"], r["p_bh"]) for r in out["pairwise"]]
    assert {r["family"] for r in wide["pairwise"]} == {"overall", "per benchmark"}


def test_not_ranked_runs_change_no_ranked_number(mixed_store: Store) -> None:
    settings = CompareOptions(resamples=ResampleSettings(SAMPLES, 3))
    every = compare(mixed_store, ["strong", "weak", "smoke", "partial"], settings)
    two = compare(mixed_store, ["strong", "weak"], settings)
    for name in ("leaderboard", "pairwise", "versus", "ranks"):
        assert every.sections()[name].equals(two.sections()[name]), name
    assert two.not_ranked.height == 0


def test_whether_a_run_is_ranked_depends_on_that_run_alone(mixed_store: Store) -> None:
    # Alone, the partial run covers every benchmark any compared run has; it is still not ranked, since the
    # benchmarks of the comparison are its dataset's, not those of the runs that happen to be compared.
    settings = CompareOptions(resamples=ResampleSettings(SAMPLES, 3))
    alone = compare(mixed_store, ["partial"], settings)
    assert alone.leaderboard.height == 0 and alone.not_ranked["reason"].to_list() == ["covers 2 of 10 benchmarks"]
    every = compare(mixed_store, ["strong", "partial"], settings)
    assert every.not_ranked["reason"].to_list() == ["covers 2 of 10 benchmarks"]
    assert every.leaderboard["run_id"].to_list() == ["strong"]


def _four() -> tuple[np.ndarray, dict[str, int]]:
    """Four runs on 3 benchmarks x 20 cases: a and b close, c and d well below them; rubric-like scores."""
    rng = np.random.default_rng(11)
    sizes = {"x": 20, "y": 20, "z": 20}
    base = rng.random(60)
    skill = np.array([0.32, 0.29, 0.08, 0.04])
    scores = np.clip(np.round((base + skill[:, None] + rng.normal(0, 0.15, (4, 60))) * 4) / 4, 0, 1)
    return scores, sizes


def test_baseline_orients_once_with_its_own_holm_family() -> None:
    """Mutation-proof: fails if the interval is negated instead of swapped, if wins/losses are not swapped,
    if Holm is not recomputed over the k-1 baseline rows, or if the re-adjustment is dropped."""
    scores, sizes = _four()
    matrix = from_arrays(scores, sizes, ["a", "b", "c", "d"])
    settings = ResampleSettings(200, 1)
    plain = compare_matrix(matrix, settings)
    based = compare_matrix(matrix, settings, baseline="b")
    assert plain.units["unit"].to_list() == ["a", "b", "c", "d"] and plain.pairwise.height == 6
    rows = based.pairwise
    assert rows.select("run_a", "run_b").rows() == [("a", "b"), ("c", "b"), ("d", "b")]
    assert rows["family"].to_list() == ["overall"] * 3
    index = {u: i for i, u in enumerate(matrix.units)}
    for row in rows.iter_rows(named=True):
        d = scores[index[row["run_a"]]] - scores[index[row["run_b"]]]
        assert row["delta"] == pytest.approx(np.mean([d[s].mean() for s in matrix.slices]), abs=1e-12)
        assert row["ci_low"] < row["delta"] < row["ci_high"]
        assert (row["wins"], row["losses"]) == (int((d > 1e-12).sum()), int((d < -1e-12).sum()))
        assert row["mean_a"] - row["mean_b"] == pytest.approx(row["delta"], abs=1e-12)
        same = plain.pairwise.filter((pl.col("run_a") == row["run_a"]) & (pl.col("run_b") == "b"))
        flipped = plain.pairwise.filter((pl.col("run_a") == "b") & (pl.col("run_b") == row["run_a"]))
        if flipped.height:  # b was first in the all-pairs table: swapped and negated
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((-flipped["ci_high"][0], -flipped["ci_low"][0]))
            assert (row["wins"], row["losses"]) == (flipped["losses"][0], flipped["wins"][0])
        else:
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((same["ci_low"][0], same["ci_high"][0]))
    assert rows["p_holm"].to_list() == pytest.approx(holm(rows["p_value"].to_numpy()).tolist(), rel=1e-12)
    all_pairs = plain.pairwise.filter(pl.col("run_a").is_in(["b"]) | pl.col("run_b").is_in(["b"]))
    assert sorted(all_pairs["p_holm"].to_list()) != pytest.approx(sorted(rows["p_holm"].to_list()))
    # Groups never depend on the baseline.
    assert based.units["tie_group"].to_list() == plain.units["tie_group"].to_list()
    with pytest.raises(ValueError, match="baseline 'zz' is not one of the compared runs"):
        compare_matrix(matrix, settings, baseline="zz")


def test_a_baseline_that_is_not_ranked_is_one_line(mixed_store: Store) -> None:
    data = read_runs(mixed_store, ["strong", "weak", "smoke"], texts=False)
    one_line = r"^compare: baseline 'smoke' is not a ranked run \(1 case in 10 benchmarks\)$"
    with pytest.raises(ValueError, match=one_line):
        compare_data(data, CompareOptions(resamples=ResampleSettings(100, 1), baseline="smoke"))


def test_report_and_forest_draw_the_pairs_as_compare_gives_them(mixed_store: Store) -> None:
    from toolkit.figures import pairwise_forest_data
    from toolkit.report.analyses import Timings, analyse

    a = analyse(mixed_store, ["strong", "weak", "smoke"], ResampleSettings(200, 1), JudgeSelection(), "weak",
                False, Timings())
    assert a.pairs.select("run_a", "run_b").rows() == [("strong", "weak")]
    assert a.pairs.equals(a.cmp.pairwise.filter(pl.col("family") == "overall"))
    forest = pairwise_forest_data(a.cmp, "weak")
    assert forest.select("run_a", "run_b", "delta", "ci_low", "ci_high", "p_holm").equals(
        a.pairs.select("run_a", "run_b", "delta", "ci_low", "ci_high", "p_holm"))
    with pytest.raises(ValueError, match="not the comparison's baseline"):
        pairwise_forest_data(a.cmp, "strong")


def test_tie_groups_and_separability() -> None:
    scores, sizes = _four()
    result = compare_matrix(from_arrays(scores, sizes, ["a", "b", "c", "d"]), ResampleSettings(200, 1))
    holm_of = {(r["run_a"], r["run_b"]): r["p_holm"] for r in result.pairwise.iter_rows(named=True)}
    assert holm_of[("a", "b")] >= 0.05 and holm_of[("a", "c")] < 0.05 and holm_of[("c", "d")] >= 0.05
    assert result.units["tie_group"].to_list() == [1, 1, 2, 2]
    separated = sum(holm_of[p] < 0.05 for p in (("a", "b"), ("b", "c"), ("c", "d")))
    assert result.separability == pytest.approx(separated / 3)
    assert result.separation["note"][0].startswith(f"{separated} of 3 adjacent pairs separated")
    assert any(n.startswith(f"separability: {separated} of 3 adjacent pairs") for n in result.notes)


def test_versus_is_each_run_against_the_reference_per_benchmark_in_its_own_family() -> None:
    scores, sizes = _four()
    matrix = from_arrays(scores, sizes, ["a", "b", "c", "d"])
    for baseline, reference in ((None, "a"), ("c", "c")):
        versus = compare_matrix(matrix, ResampleSettings(200, 1), per_benchmark=True, baseline=baseline).versus
        assert versus.columns == ["run_id", "reference", "benchmark", "n_cases", "delta", "ci_low", "ci_high",
                                  "p_value", "p_holm", "family", "ci_note"]
        assert versus.height == 3 * 3 and set(versus["reference"]) == {reference}
        assert reference not in versus["run_id"].to_list()
        assert versus["family"].unique().to_list() == [f"versus {reference}, per benchmark"]
        assert versus["p_holm"].to_list() == pytest.approx(holm(versus["p_value"].to_numpy()).tolist(), rel=1e-12)
        for row in versus.iter_rows(named=True):
            s = matrix.slices[matrix.benchmarks.index(row["benchmark"])]
            want = (scores[matrix.units.index(row["run_id"])][s] - scores[matrix.units.index(reference)][s]).mean()
            assert row["delta"] == pytest.approx(want, abs=1e-12) and row["ci_low"] < row["delta"] < row["ci_high"]


def test_run_intervals_are_the_stratified_t_of_the_run_scores() -> None:
    scores, sizes = _four()
    result = compare_matrix(from_arrays(scores, sizes, ["a", "b", "c", "d"]), ResampleSettings(200, 1))
    slices = (slice(0, 20), slice(20, 40), slice(40, 60))
    for row in result.units.iter_rows(named=True):
        t = paired_t(scores[["a", "b", "c", "d"].index(row["unit"])][None, :], slices)
        assert (row["ci_low"], row["ci_high"]) == (t.ci_low[0], t.ci_high[0])
    for row in result.benchmarks.iter_rows(named=True):
        s = slices[["x", "y", "z"].index(row["benchmark"])]
        t = paired_t(scores[["a", "b", "c", "d"].index(row["unit"])][None, s])
        assert (row["ci_low"], row["ci_high"]) == (t.ci_low[0], t.ci_high[0])


def test_overall_rank_test_is_stratified_not_pooled() -> None:
    scores, sizes = _four()
    matrix = from_arrays(scores, sizes, ["a", "b", "c", "d"])
    row = compare_matrix(matrix, ResampleSettings(200, 1)).pairwise.row(0, named=True)
    d = (scores[0] - scores[1])[None, :]
    assert row["wilcoxon_p"] == van_elteren_p(d, matrix.slices)[0]
    assert row["wilcoxon_p"] != pytest.approx(wilcoxon_p(d)[0], rel=1e-6)


def test_a_difference_that_never_varies_keeps_its_sign_test_but_has_no_interval() -> None:
    t = paired_t(np.full((1, 8), 0.25))
    assert t.p_value[0] == pytest.approx(2.0 ** -7)
    assert np.isnan([t.ci_low[0], t.ci_high[0]]).all() and t.ci_note == ["no variation between cases: no interval"]


def test_harm_and_item_ratios_have_no_interval_where_resampling_is_degenerate() -> None:
    from toolkit.analysis.ratios import case_ratios

    frame = pl.DataFrame({
        "g": ["one"] + ["flat"] * 4 + ["varies"] * 4 + ["thin"] * 4, "benchmark": ["b"] * 12 + ["a"],
        "case_id": ["c0", "c0", "c1", "c2", "c3", "c0", "c1", "c2", "c3", "c0", "c1", "c2", "a0"],
        "num": [1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0], "den": [1.0] * 13})
    out = case_ratios(frame, ["g"], ResampleSettings(300, 1))
    rows = {r["g"]: r for r in out.iter_rows(named=True)}
    assert (rows["thin"]["ci_low"], rows["thin"]["ci_note"]) == (None, "1 case in 1 benchmark: no interval")
    assert (rows["one"]["ci_low"], rows["one"]["ci_note"]) == (None, "1 case: no interval")
    assert (rows["flat"]["ci_high"], rows["flat"]["ci_note"]) == (None, "no variation between cases: no interval")
    assert rows["varies"]["ci_low"] < rows["varies"]["ci_high"] and rows["varies"]["ci_note"] is None


def test_compare_means_equal_summary_to_the_bit(demo_store: Path) -> None:
    from toolkit.summary import SummaryOptions, summarize

    store = Store.open(demo_store)
    runs = store.run_ids()
    cmp = compare(store, runs, CompareOptions(resamples=ResampleSettings(100, 1)))
    summaries = summarize(store, runs, SummaryOptions())
    overall = dict(zip(cmp.leaderboard["run_id"].to_list() + cmp.not_ranked["run_id"].to_list(),
                       cmp.leaderboard["overall"].to_list() + cmp.not_ranked["overall"].to_list()))
    assert set(overall) == set(runs)
    for run_id, summary in summaries.items():
        assert overall[run_id] == summary["overall_macro_mean"], run_id
        means = {b: m for r, b, m in cmp.benchmarks.select("run_id", "benchmark", "mean").iter_rows() if r == run_id}
        assert means == {b: v["mean"] for b, v in summary["benchmarks"].items()}, run_id
    cases = per_case(read_runs(store, runs), JudgeSelection())
    assert cases.height  # the demo store has case scores to compare


def test_compare_takes_a_baseline_and_refuses_an_unranked_one_in_one_line(mixed_store: Store) -> None:
    out = _compare_json(mixed_store, "--baseline", "weak")
    assert [(r["run_a"], r["run_b"]) for r in out["pairwise"]] == [("strong", "weak")]
    plain = _compare_json(mixed_store)["pairwise"][0]  # (better, worse) = (strong, weak) already
    assert out["pairwise"][0]["delta"] == plain["delta"] and out["pairwise"][0]["p_holm"] == plain["p_holm"]
    done = bedside_process(["compare", "--all", "--store", str(mixed_store.root), "--samples", str(SAMPLES),
                            "--baseline", "smoke"])
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "baseline 'smoke' is not a ranked run" in done.stderr


def test_run_intervals_stay_within_the_range_of_scores() -> None:
    # Runs scoring 1 on most cases: the t interval's upper end (mean + t SE) would pass 1.
    scores = np.ones((2, 20))
    scores[0, [0, 10]] = 0.0
    scores[1, [3]] = 0.2
    result = compare_matrix(from_arrays(scores, {"a": 10, "b": 10}), ResampleSettings(200, 1))
    for frame in (result.units, result.benchmarks):
        bounds = frame.drop_nulls("ci_low")
        assert bounds.height and (bounds["ci_low"] >= 0).all() and (bounds["ci_high"] <= 1).all()
    assert result.units["ci_high"].to_list()[0] == 1.0  # clipped, not dropped


def test_pair_intervals_stay_within_the_range_of_differences() -> None:
    # One benchmark of 3 cases, differences -1, 0, 1 shifted: the t interval would reach past -1 and 1.
    scores = np.array([[1.0, 0.0, 1.0, 0.0, 1.0, 0.5], [0.0, 1.0, 0.0, 1.0, 0.0, 0.5]])
    result = compare_matrix(from_arrays(scores, {"x": 3, "y": 3}), ResampleSettings(200, 1), per_benchmark=True,
                            min_cases=1)
    bounded = result.pairwise.drop_nulls("ci_low")
    assert bounded.height and (bounded["ci_low"] >= -1).all() and (bounded["ci_high"] <= 1).all()
    assert -1.0 in bounded["ci_low"].to_list() or 1.0 in bounded["ci_high"].to_list()  # clipped, not dropped


def test_a_rater_pair_s_adjusted_p_does_not_depend_on_the_other_runs_selected(tmp_path) -> None:
    from toolkit.analysis import AgreementOptions, judge_agreement

    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    for i, run in enumerate(("r1", "r2", "r3")):
        write_rows(store, dataset, run, simulate_decisions(dataset, run, skill=0.5 * i, seed=i, passes=3, flip=0.2),
                   created=i)
    options = AgreementOptions(resamples=ResampleSettings(SAMPLES, 1))
    alone = judge_agreement(read_runs(store, ["r1"], texts=False), options).scores
    every = judge_agreement(read_runs(store, ["r1", "r2", "r3"], texts=False), options).scores
    keys = ["rater_a", "rater_b", "benchmark", "p_holm", "p_bh", "family"]
    assert every.filter(pl.col("run_id") == "r1").select(keys).equals(alone.select(keys))
    assert set(alone["family"]) == {"overall, run r1", "per benchmark, run r1"}


def test_harms_lists_runs_in_leaderboard_order(tmp_path) -> None:
    # Stored first is the weakest: the harms table used to follow the store's order.
    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    for i, (run, skill) in enumerate((("low", -1.0), ("high", 2.0), ("mid", 0.5))):
        write_rows(store, dataset, run, simulate_decisions(dataset, run, skill=skill, seed=i), created=i)
    board = [r["run_id"] for r in _compare_json(store)["leaderboard"]]
    done = bedside_process(["harms", "--all", "--store", str(store.root), "--samples", str(SAMPLES),
                            "--format", "json"])
    assert done.returncode == 0, done.stderr
    listed = list(dict.fromkeys(r["run_id"] for r in json.loads(done.stdout)["harms"]))
    assert listed == board == ["high", "mid", "low"]
