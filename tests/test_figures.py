"""toolkit.figures on real stores of simulated runs: every figure draws exactly its ``*_data`` frame, which
equals the analysis frame it comes from; significance marks follow Holm; bytes are deterministic; edge
cases raise one clear ValueError or draw without crashing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from polars.testing import assert_frame_equal, assert_series_equal
from scipy import stats

from tests.analysis_sim import write_run
from toolkit import figures
from toolkit.analysis import (AgreementOptions, CompareOptions, HarmOptions, ItemOptions, ResampleSettings,
                              analyse_items, compare_data, harms, judge_agreement)
from toolkit.analysis.agreement import Agreement
from toolkit.analysis.compare import Comparison, compare_cases
from toolkit.dataset import load_dataset
from toolkit.figures.style import short_labels
from toolkit.selection import per_case, read_runs
from toolkit.store import Store

ROOT = Path(__file__).resolve().parents[1]
FAST = ResampleSettings(300, 3)
RUNS = ["r0", "r1", "r2", "r3"]


def _with_usage(store: Store, dataset, run_id: str, factor: float) -> None:
    """A second, successful answer attempt per case with text and token usage (the latest attempt is scored)."""
    cases = dataset.cases["case_id"].to_list()
    store.write("answers", run_id, [{
        "run_id": run_id, "case_id": c, "attempt": 2, "seq": 1000 + i, "answer_model": f"model-{run_id}",
        "answer": "x" * int(100 + factor * (i % 7) * 40), "prompt_tokens": 200,
        "completion_tokens": int(50 + factor * (i % 7) * 10), "latency_s": 0.5 + factor, "error": None}
        for i, c in enumerate(cases)])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """r0..r3 of rising skill on the sample: r0 judged twice, r1 also by a second judge, r3 missing a whole
    benchmark (its calculators_numerical cases failed); every run has answer texts and token usage."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("figures") / "store")
    numerical = frozenset(dataset.cases.filter(pl.col("benchmark") == "calculators_numerical")["case_id"].to_list())
    for i, run_id in enumerate(RUNS):
        write_run(store, dataset, run_id, skill=0.5 * i, seed=i, created=i, passes=2 if i == 0 else 1,
                  extra_judges=(("judge-y", 0.15),) if i == 1 else (), failed=numerical if i == 3 else frozenset())
        _with_usage(store, dataset, run_id, factor=1.0 + i)
    return store


@pytest.fixture(scope="module")
def data(store: Store):
    return read_runs(store, RUNS)


@pytest.fixture(scope="module")
def cmp(data):
    return compare_data(data, CompareOptions(resamples=FAST))


@pytest.fixture(scope="module")
def cases(data) -> pl.DataFrame:
    return per_case(data)


def _points(ax) -> int:
    return sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))


def _ticks(ax, axis: str = "y") -> list[str]:
    return [t.get_text() for t in (ax.get_yticklabels() if axis == "y" else ax.get_xticklabels())]


def test_leaderboard_draws_each_run_with_its_interval_and_rank(cmp) -> None:
    frame = figures.leaderboard_data(cmp)
    assert_frame_equal(frame.select("run_id", "rank", "overall", "ci_low", "ci_high"),
                       cmp.leaderboard.select("run_id", "rank", "overall", "ci_low", "ci_high"))
    assert_frame_equal(frame.select("run_id", "rank_low", "rank_high"), cmp.ranks.select("run_id", "rank_low", "rank_high"))
    fig = figures.leaderboard(cmp)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert _ticks(left) == cmp.leaderboard["run_id"].to_list()
    (means,) = [c for c in left.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(means.get_offsets()[:, 0], cmp.leaderboard["overall"].to_numpy())
    (bars,) = [c for c in left.collections if isinstance(c, LineCollection)]
    assert len(bars.get_segments()) == cmp.leaderboard.height
    assert [line.get_marker() for line in right.lines] == ["D"] and len(right.lines[0].get_xdata()) == cmp.leaderboard.height


def test_heatmap_cells_are_the_benchmark_means_and_a_missing_benchmark_is_marked(cmp) -> None:
    frame = figures.benchmark_heatmap_data(cmp)
    columns = ["run_id", "benchmark", "n", "mean", "ci_low", "ci_high"]
    assert_frame_equal(frame.select(columns), cmp.benchmarks.select(columns))
    fig = figures.benchmark_heatmap(cmp)
    ax = fig.axes[0]
    (image,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
    grid = image.get_array()
    benchmarks = sorted(frame["benchmark"].unique().to_list())
    assert _ticks(ax, "x") == [b.replace("_", " ") for b in benchmarks]
    runs = cmp.leaderboard["run_id"].to_list() + cmp.not_ranked["run_id"].to_list()  # not ranked: below
    for run_id, bench, mean in frame.select("run_id", "benchmark", "mean").iter_rows():
        assert grid[runs.index(run_id), benchmarks.index(bench)] == pytest.approx(mean)
    assert grid.mask[runs.index("r3"), benchmarks.index("calculators_numerical")]
    assert [t.get_text() for t in ax.texts].count("no cases") == 1


def test_forest_marks_exactly_the_holm_significant_pairs(cmp) -> None:
    overall = cmp.pairwise.filter(pl.col("benchmark") == "overall")
    frame = figures.pairwise_forest_data(cmp)
    assert frame.height == overall.height == 3  # r0..r2: r3 misses a benchmark and is not ranked
    joined = frame.join(overall, on=["run_a", "run_b"], suffix="_cmp")
    for column in ("delta", "ci_low", "ci_high", "p_holm"):
        assert_series_equal(joined[column], joined[f"{column}_cmp"], check_names=False)
    assert frame["significant"].to_list() == (frame["p_holm"] < 0.05).to_list()
    assert frame["significant"].any()
    fig = figures.pairwise_forest(cmp)
    ax = fig.axes[0]
    filled, hollow = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(filled.get_offsets()) == int(frame["significant"].sum())
    assert len(hollow.get_offsets()) == frame.height - int(frame["significant"].sum())
    assert _ticks(ax) == frame["label"].to_list()
    assert all(" − " in label for label in _ticks(ax))


def test_forest_against_a_baseline_draws_the_pairs_as_the_comparison_oriented_them(data) -> None:
    based = compare_data(data, CompareOptions(resamples=FAST, baseline="r1"))
    frame = figures.pairwise_forest_data(based, baseline="r1")
    assert set(frame["run_b"]) == {"r1"} and frame.height == based.leaderboard.height - 1
    overall = based.pairwise.filter(pl.col("benchmark") == "overall")
    joined = frame.join(overall, on=["run_a", "run_b"], suffix="_cmp")
    for column in ("delta", "ci_low", "ci_high", "p_holm"):
        assert_series_equal(joined[column], joined[f"{column}_cmp"], check_names=False)
    assert _points(figures.pairwise_forest(based, baseline="r1").axes[0]) == frame.height
    with pytest.raises(ValueError, match="baseline 'nope' is not the comparison's baseline"):
        figures.pairwise_forest(based, baseline="nope")


def _many_runs(runs: int = 30, per_benchmark: int = 25) -> tuple[Comparison, pl.DataFrame]:
    """A comparison of ``runs`` runs on 10 benchmarks from the comparison engine on synthetic case scores."""
    rng = np.random.default_rng(5)
    ids = [f"vendor/a-rather-long-model-name-{i:02d}-2025-preview" for i in range(runs)]
    benchmarks = [f"bench_{b}" for b in range(10)]
    cases = pl.DataFrame({
        "run_id": np.repeat(ids, 10 * per_benchmark),
        "benchmark": np.tile(np.repeat(benchmarks, per_benchmark), runs),
        "case_id": np.tile([f"c{k}" for k in range(10 * per_benchmark)], runs),
        "score": np.clip(rng.normal(np.repeat(np.linspace(0.5, 0.8, runs), 10 * per_benchmark), 0.25), 0, 1).round(2),
    })
    result = compare_cases(cases, ids, ResampleSettings(100, 1))
    units = {"unit": "run_id"}
    cmp = Comparison(result.units.rename(units | {"n_cases": "completed"}), result.benchmarks.rename(units),
                     result.pairwise, result.ranks.rename(units), pl.DataFrame(), result.notes)
    return cmp, cases


def test_forest_of_many_pairs_shows_the_largest_and_says_so() -> None:
    cmp, cases = _many_runs()
    frame = figures.pairwise_forest_data(cmp)
    assert frame.height == 435 and frame["shown"].sum() == 40
    shown = frame.filter(pl.col("shown"))["delta"].abs()
    assert shown.min() >= frame.filter(~pl.col("shown"))["delta"].abs().max()
    fig = figures.pairwise_forest(cmp)
    assert "40 largest |Δ| of 435 pairs" in fig.axes[0].get_title(loc="left")
    assert _points(fig.axes[0]) == 40
    board = figures.leaderboard(cmp)
    assert board.get_figheight() > 8  # 30 rows, each readable
    labels = _ticks(board.axes[0])
    assert len(set(labels)) == 30 and max(len(label) for label in labels) <= 28
    assert all(label.startswith("a-rather") for label in labels)  # the shared "vendor/" is dropped
    matrix = figures.win_delta_matrix(cmp, cases)
    assert matrix.get_figheight() > 10  # stacked panels at 30 runs
    assert figures.score_distributions(cases).axes[-1].get_ylabel().startswith("run rank")  # a colour bar, no legend


def test_win_fraction_from_cases_agrees_with_the_comparison(cmp, cases) -> None:
    frame = figures.win_delta_matrix_data(cmp, cases)
    assert frame.height == 6  # the three ranked runs
    for row in cmp.pairwise.filter(pl.col("benchmark") == "overall").iter_rows(named=True):
        ab = frame.filter((pl.col("row") == row["run_a"]) & (pl.col("column") == row["run_b"])).row(0, named=True)
        ba = frame.filter((pl.col("row") == row["run_b"]) & (pl.col("column") == row["run_a"])).row(0, named=True)
        assert (ab["wins"], ab["ties"], ab["losses"], ab["n_common"]) == (row["wins"], row["ties"], row["losses"],
                                                                          row["n_cases"])
        assert ab["win_fraction"] == pytest.approx(row["wins"] / row["n_cases"])
        assert ba["win_fraction"] == pytest.approx(row["losses"] / row["n_cases"])
        assert ab["delta"] == pytest.approx(row["delta"]) and ba["delta"] == pytest.approx(-row["delta"])
    fig = figures.win_delta_matrix(cmp, cases)
    win_ax, delta_ax = fig.axes[:2]  # then the two colour bars
    assert _ticks(win_ax) == cmp.leaderboard["run_id"].to_list()
    stars = [t for t in delta_ax.texts if t.get_text().endswith("*")]
    assert len(stars) == int(frame["significant"].sum())


def test_distributions_scatter_and_their_data(cmp, cases) -> None:
    frame = figures.score_distributions_data(cases)
    assert frame.height == cases.height
    assert (frame.group_by("run_id", "benchmark").agg(pl.col("ecdf").max())["ecdf"] == 1.0).all()
    fig = figures.score_distributions(cases)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(panels) == cases["benchmark"].n_unique()
    assert sum(len(ax.lines) for ax in panels) == cases.select("run_id", "benchmark").unique().height
    scatter = figures.pair_scatter_data(cases, "r3", "r2")
    assert scatter.height == cases.filter(pl.col("run_id") == "r3").height  # r3's cases are a subset of r2's
    fig = figures.pair_scatter(cases, "r3", "r2")
    assert _points(fig.axes[0]) == scatter.height
    assert fig.axes[0].get_xlabel().startswith("r3") and fig.axes[0].get_ylabel().startswith("r2")


def test_item_rates_are_the_item_analysis_rates(data) -> None:
    items = analyse_items(data, ItemOptions(resamples=FAST))
    frame = figures.item_rates_data(items, top=5)
    missed, endorsed = frame.filter(pl.col("kind") == "missed"), frame.filter(pl.col("kind") == "endorsed")
    assert missed.height == 5 and endorsed.height == 5 and (missed["points"] >= 2).all() and (endorsed["points"] < 0).all()
    source = items.items.select("item_id", "match_rate", "ci_low", "ci_high")
    joined = missed.join(source, on="item_id")
    np.testing.assert_allclose(joined["rate"], 1 - joined["match_rate"])
    np.testing.assert_allclose(joined["ci_high"], 1 - joined["ci_low_right"])
    assert missed["rate"].to_list() == sorted(missed["rate"].to_list(), reverse=True)
    top_missed = items.items.filter(pl.col("points") >= 2)["match_rate"].min()
    assert missed["rate"][0] == pytest.approx(1 - top_missed)
    fig = figures.item_rates(items, top=5)
    assert len(fig.axes) == 2 and all(len(ax.patches) == 5 for ax in fig.axes)
    assert "[" in _ticks(fig.axes[0])[0]  # item text with its benchmark and points


def test_harm_figures_draw_the_harms_rows(data) -> None:
    harm = harms(data, HarmOptions(resamples=FAST))
    frame = figures.harm_rates_data(harm)
    expected = harm.filter(pl.col("metric").is_in(["severe_omission_case_rate", "severe_commission_case_rate"]))
    assert_frame_equal(frame, expected.select(frame.columns))
    fig = figures.harm_rates(harm)
    assert len(fig.axes) == 2 and all(_points(ax) == frame.height // 2 for ax in fig.axes)
    assert _ticks(fig.axes[0]) == harm["run_id"].unique(maintain_order=True).to_list()
    pr = figures.precision_recall_data(harm)
    assert pr.height == 4 and set(pr["scope"]) == {"both"}
    for run_id, precision, recall in pr.select("run_id", "precision", "recall").iter_rows():
        both = harm.filter((pl.col("run_id") == run_id) & (pl.col("scope") == "both"))
        assert precision == both.filter(pl.col("metric") == "precision")["value"][0]
        assert recall == both.filter(pl.col("metric") == "recall")["value"][0]
    assert _points(figures.precision_recall(harm).axes[0]) == 4


def test_harm_figures_without_intervals(data) -> None:
    harm = harms(data, HarmOptions(resamples=None))
    assert "ci_low" not in harm.columns
    assert figures.harm_rates_data(harm)["ci_low"].is_null().all()
    figures.harm_rates(harm)
    figures.precision_recall(harm)


def test_judge_agreement_per_benchmark(data) -> None:
    agreement = judge_agreement(data, AgreementOptions(resamples=FAST))
    frame = figures.judge_agreement_data(agreement)
    columns = ["run_id", "rater_a", "rater_b", "benchmark", "n_cases", "delta", "ci_low", "ci_high", "p_holm"]
    key = ["run_id", "rater_a", "rater_b", "benchmark"]
    assert_frame_equal(frame.select(columns).sort(key), agreement.scores.select(columns).sort(key))
    assert frame["series"].n_unique() == 2  # r0: pass 1 vs 2; r1: judge-x vs judge-y
    assert frame["significant"].to_list() == (frame["p_holm"] < 0.05).fill_null(False).to_list()
    fig = figures.judge_agreement(agreement)
    assert _points(fig.axes[0]) == frame.height
    assert _ticks(fig.axes[0])[-1] == "overall"
    empty = Agreement(agreement.summary.clear(), agreement.pairs.clear(), agreement.scores.clear(),
                      agreement.flips.clear(), ["r2"])
    with pytest.raises(ValueError, match="single pass and judge"):
        figures.judge_agreement(empty)


def test_length_bias_and_cost_use_the_scored_answer(data, cases) -> None:
    frame = figures.length_bias_data(data, cases)
    assert frame["unit"][0] == "characters" and frame.height == cases.height
    assert frame["length"].min() >= 100  # the latest attempt's text, not attempt 1's "simulated answer"
    assert frame["run_rho"].is_not_null().all()
    fig = figures.length_bias(data, cases)
    assert _points(fig.axes[0]) == cases.height and set(_ticks(fig.axes[1])) == set(RUNS)
    one = cases.filter(pl.col("benchmark") == "drug_safety")
    single = figures.length_bias_data(data, one).filter(pl.col("run_id") == "r1")
    assert single["run_rho"][0] == pytest.approx(stats.spearmanr(single["length"], single["score"]).statistic)
    constant = dataclasses.replace(data, answers=data.answers.with_columns(answer=pl.lit("same length")))
    assert figures.length_bias_data(constant, cases)["run_rho"].is_null().all()
    with pytest.raises(ValueError, match="length_bias: answer length or score never varies"):
        figures.length_bias(constant, cases)
    costs = figures.cost_data(data, cases)
    assert costs["run_id"].to_list() == ["r3", "r2", "r1", "r0"]  # best first
    assert costs.filter(pl.col("run_id") == "r0")["median_latency_s"][0] == pytest.approx(1.5)
    fig = figures.cost(data, cases)
    assert len(fig.axes) == 2 and all(_points(ax) == 4 for ax in fig.axes)


def test_length_falls_back_to_tokens_and_cost_needs_usage(store: Store) -> None:
    bare = read_runs(store, RUNS, texts=False)
    assert figures.length_bias_data(bare, per_case(bare))["unit"][0] == "completion tokens"
    no_usage = dataclasses.replace(bare, answers=bare.answers.filter(pl.col("attempt") == 1))
    with pytest.raises(ValueError, match="cost: no run has token usage"):
        figures.cost(no_usage, per_case(no_usage))
    with pytest.raises(ValueError, match="length_bias: no scored case has an answer length"):
        figures.length_bias(no_usage, per_case(no_usage))


def test_one_run_draws_its_leaderboard_and_refuses_pairs(data) -> None:
    one = compare_data(read_runs_subset(data, ["r2"]), CompareOptions(resamples=FAST))
    cases = per_case(read_runs_subset(data, ["r2"]))
    assert figures.leaderboard(one).axes[0].get_yticklabels()[0].get_text() == "r2"
    figures.benchmark_heatmap(one)
    figures.score_distributions(cases)
    with pytest.raises(ValueError, match="pairwise_forest: needs two or more runs to compare"):
        figures.pairwise_forest(one)
    with pytest.raises(ValueError, match="win_delta_matrix: needs two or more runs"):
        figures.win_delta_matrix(one, cases)
    with pytest.raises(ValueError, match="run 'r0' has no case in the frame"):
        figures.pair_scatter(cases, "r2", "r0")
    with pytest.raises(ValueError, match="the same run"):
        figures.pair_scatter(cases, "r2", "r2")


def read_runs_subset(data, run_ids: list[str]):
    """``data`` restricted to some runs (what read_runs gives for them)."""
    return data.of(run_ids)


def test_nan_scores_and_null_intervals_do_not_break_figures(cmp, cases) -> None:
    nan_cases = cases.with_columns(score=pl.when(pl.col("case_id") == cases["case_id"][0]).then(float("nan"))
                                   .otherwise(pl.col("score")))
    fig = figures.score_distributions(nan_cases)
    assert "unscored case(s) left out" in fig._suptitle.get_text()
    assert figures.pair_scatter_data(nan_cases, "r0", "r1").height == cases.filter(pl.col("run_id") == "r0").height - 1
    nulls = dataclasses.replace(cmp, leaderboard=cmp.leaderboard.with_columns(ci_low=None, ci_high=None),
                                benchmarks=cmp.benchmarks.with_columns(ci_low=None, ci_high=None),
                                pairwise=cmp.pairwise.with_columns(ci_low=None, ci_high=None, p_holm=None))
    figures.leaderboard(nulls)
    figures.benchmark_heatmap(nulls)
    assert not figures.pairwise_forest_data(nulls)["significant"].any()
    figures.pairwise_forest(nulls)
    figures.win_delta_matrix(nulls, nan_cases)


def test_rendering_is_deterministic(cmp, cases, tmp_path: Path) -> None:
    first, second = figures.pairwise_forest(cmp), figures.pairwise_forest(cmp)
    png = figures.png_bytes(first)
    assert png.startswith(b"\x89PNG") and png == figures.png_bytes(second) == figures.png_bytes(first)
    assert b"Software" not in png and b"matplotlib" not in png.lower()
    svg = figures.svg_text(first)
    assert svg.startswith("<svg") and svg == figures.svg_text(second)
    assert "<dc:date>" not in svg
    heat = figures.svg_text(figures.benchmark_heatmap(cmp))
    assert heat == figures.svg_text(figures.benchmark_heatmap(cmp))
    path = figures.save_png(figures.leaderboard(cmp), tmp_path / "deep" / "board.png")
    assert path.read_bytes() == figures.png_bytes(figures.leaderboard(cmp))
    width, height = np.frombuffer(png[16:24], dtype=">u4")
    assert width == 800  # 8 in at 100 dpi


def test_short_labels_are_unique_and_short() -> None:
    ids = [f"openai/very-long-model-name-{i:02d}-2025-01-preview" for i in range(12)]
    labels = short_labels(ids)
    assert len(set(labels.values())) == 12 and all(len(v) <= 28 for v in labels.values())
    assert all(f"{i:02d}" in labels[run] for i, run in enumerate(ids))  # the part that differs survives
    assert short_labels(["sim/strong", "sim/weak"]) == {"sim/strong": "sim/strong", "sim/weak": "sim/weak"}
    clash = short_labels(["a" * 40, "a" * 40 + "b"], width=10)
    assert len(set(clash.values())) == 2


def test_no_other_command_pays_for_matplotlib() -> None:
    code = ("import sys, toolkit, toolkit.cli, toolkit.analysis, toolkit.summary; "
            "assert 'matplotlib' not in sys.modules and 'toolkit.figures' not in sys.modules, 'matplotlib loaded'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_report_computes_each_figures_data_once(demo_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each figure draws the frame the report writes as its CSV (``twin=``), not a second computation of it."""
    import importlib

    from toolkit.report import figs
    from toolkit.report.analyses import Timings, analyse
    from toolkit.selection import JudgeSelection
    from toolkit.store import Store

    calls: dict[str, int] = {}
    for spec in figs.SPECS:
        name = f"{spec.name}_data"
        real = getattr(figures, name)
        module = importlib.import_module(real.__module__)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(figures, name, counted)
        monkeypatch.setattr(module, name, counted)  # the figure function's own reference to its twin
    a = analyse(Store.open(demo_store), ["sim/strong", "sim/medium", "sim/weak"], ResampleSettings(200, 1),
                JudgeSelection(), None, False, Timings())
    drawn = figs.draw(a, [])
    names = [f.key for section in drawn.values() for f in section]
    assert len(names) >= 8 and all(f.data is not None for section in drawn.values() for f in section)
    assert {name: calls.get(f"{name}_data") for name in names} == {name: 1 for name in names}


def test_a_case_with_several_answer_samples_costs_all_of_them(data, cases) -> None:
    # K answers per case: the cost figure's tokens per case are all K answers' (as its dollars are), not one
    # sample's picked by row order. Here sample 1 repeats
    # sample 0 with twice its completion tokens: per case 2 prompts and 3 completions.
    again = data.answers.with_columns(sample=pl.lit(1, data.answers["sample"].dtype),
                                      completion_tokens=pl.col("completion_tokens") * 2)
    two = dataclasses.replace(data, answers=pl.concat([again, data.answers]))
    one, both = figures.cost_data(data, cases), figures.cost_data(two, cases)
    assert both["completion_tokens_per_case"].to_list() == pytest.approx(
        [3 * v for v in one["completion_tokens_per_case"].to_list()])
    assert both["tokens_per_case"].to_list() == pytest.approx(
        [2 * t + c for t, c in zip(one["tokens_per_case"].to_list(), one["completion_tokens_per_case"].to_list())])
    # the length figure plots each answer (tests/test_answers_per_sample.py): twice the points
    assert figures.length_bias_data(two, cases).height == 2 * figures.length_bias_data(data, cases).height
