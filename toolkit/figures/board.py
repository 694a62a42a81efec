"""The leaderboard (overall mean, 95% interval, rank interval) and the run x benchmark heatmap."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from toolkit.analysis.compare import Comparison
from toolkit.figures.palette import Palette, completed, leaderboard_runs
from toolkit.figures.style import (GREY, LIGHT, SEQUENTIAL, laid_out, new_figure, num, rows_height,
                                   short_labels, styled)


def leaderboard_data(cmp: Comparison, palette: Palette | None = None) -> pl.DataFrame:
    """One row per run in leaderboard order: overall mean and interval, observed rank and rank interval.
    (``palette`` only colours the figure: the leaderboard's order is its own.)"""
    board = cmp.leaderboard
    labels = short_labels(board["run_id"].to_list())
    ranks = cmp.ranks.select("run_id", "rank_median", "rank_low", "rank_high", "share_first")
    return board.select("run_id", "rank", "overall", "ci_low", "ci_high", "completed", "n_benchmarks").join(
        ranks, on="run_id", how="left", maintain_order="left").with_columns(
        label=pl.col("run_id").replace_strict(labels, return_dtype=pl.String))


@laid_out
def leaderboard(cmp: Comparison, palette: Palette | None = None, *, twin: pl.DataFrame | None = None) -> Figure:
    """Overall mean with its 95% interval per run (left, in the run's colour) and its 95% rank interval (right)."""
    frame = leaderboard_data(cmp) if twin is None else twin
    if frame.is_empty():
        raise ValueError("leaderboard: no ranked run to draw (every run is listed as not ranked)")
    n = frame.height
    y = np.arange(n)
    colours = completed(palette, frame["run_id"].to_list())
    ink = [colours[r] for r in frame["run_id"].to_list()]
    with styled():
        fig = new_figure(rows_height(n, base=1.6))
        left, right = fig.subplots(1, 2, sharey=True, width_ratios=[3, 1.3])
        mean = frame["overall"].to_numpy().astype(float)
        lo = frame["ci_low"].to_numpy().astype(float)
        hi = frame["ci_high"].to_numpy().astype(float)
        has_ci = ~(np.isnan(lo) | np.isnan(hi))
        left.hlines(y[has_ci], lo[has_ci], hi[has_ci], color=[c for c, ok in zip(ink, has_ci) if ok], linewidth=2.2,
                    alpha=0.55)
        left.scatter(mean, y, color=ink, s=40, edgecolor="#404040", linewidth=0.4, zorder=3)
        for i in np.flatnonzero(np.isnan(mean)):
            left.text(0.5, y[i], "no score", ha="center", va="center", color=GREY, fontsize=9)
        left.set_xlim(*_unit_limits(np.concatenate([mean, lo, hi])))
        left.set_xlabel("overall score (macro mean, 0–1), 95% interval")
        left.set_yticks(y, frame["label"].to_list())
        left.grid(axis="x")
        left.set_title("Leaderboard")
        r = frame["rank"].to_numpy().astype(float)
        rlo = frame["rank_low"].to_numpy().astype(float)
        rhi = frame["rank_high"].to_numpy().astype(float)
        ok = ~(np.isnan(rlo) | np.isnan(rhi))
        right.hlines(y[ok], rlo[ok] - 0.3, rhi[ok] + 0.3, color=GREY, linewidth=6, alpha=0.45)
        right.plot(r, y, "D", color="#404040", markersize=5, zorder=3)  # ink: colours mean runs
        right.set_xlim(0.3, max(n, 1) + 0.7)
        right.invert_xaxis()  # rank 1 on the right, next to the best mean
        step = max(1, int(np.ceil(n / 6)))
        right.set_xticks(list(range(1, n + 1, step)))
        right.set_xlabel("rank (95% interval)")
        right.grid(axis="x")
        right.set_title("Rank")
        right.tick_params(axis="y", left=False)
        left.set_ylim(n - 0.5, -0.5)  # best at the top
    return fig


def _unit_limits(values: np.ndarray) -> tuple[float, float]:
    """x limits that hold every finite value with a margin, clipped to a little beyond [0, 1]."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    pad = max(0.03, 0.08 * (hi - lo))
    return max(-0.02, lo - pad), min(1.02, hi + pad)


def benchmark_heatmap_data(cmp: Comparison) -> pl.DataFrame:
    """One row per run x benchmark the run has: mean, interval and its half width, cases."""
    labels = short_labels(leaderboard_runs(cmp))
    return cmp.benchmarks.select(
        "run_id", "benchmark", "n", "mean", "ci_low", "ci_high",
        ((pl.col("ci_high") - pl.col("ci_low")) / 2).alias("half_width"),
    ).with_columns(label=pl.col("run_id").replace_strict(labels, default=pl.col("run_id"), return_dtype=pl.String))


@laid_out
def benchmark_heatmap(cmp: Comparison, *, twin: pl.DataFrame | None = None) -> Figure:
    """Run x benchmark means; each cell reads "mean" over "±half width" of its 95% interval.

    Runs in leaderboard order (runs not ranked below), benchmarks alphabetical; a benchmark a run has no case in is a grey
    hatched cell marked "no cases".
    """
    frame = benchmark_heatmap_data(cmp) if twin is None else twin
    present = set(frame["run_id"].to_list())
    runs = [r for r in leaderboard_runs(cmp) if r in present or r in set(cmp.leaderboard["run_id"].to_list())]
    labels = short_labels(runs)
    benchmarks = sorted(frame["benchmark"].unique().to_list())
    grid = np.full((len(runs), len(benchmarks)), np.nan)
    half = np.full_like(grid, np.nan)
    row = {r: i for i, r in enumerate(runs)}
    col = {b: j for j, b in enumerate(benchmarks)}
    for run_id, bench, mean, width in frame.select("run_id", "benchmark", "mean", "half_width").iter_rows():
        if run_id in row:
            grid[row[run_id], col[bench]] = np.nan if mean is None else mean
            half[row[run_id], col[bench]] = np.nan if width is None else width
    with styled():
        fig = new_figure(rows_height(len(runs), base=2.4, per_row=0.42),
                         width=max(8.0, 2.6 + 0.72 * len(benchmarks)))
        ax = fig.subplots()
        ax.set_facecolor(LIGHT)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=SEQUENTIAL, vmin=0, vmax=1, aspect="auto")
        for i, j in np.argwhere(np.isnan(grid)):
            ax.add_patch(_hatched(j, i))
            ax.text(j, i, "no cases", ha="center", va="center", fontsize=9, color="#404040")
        for i, j in np.argwhere(~np.isnan(grid)):
            ink = "white" if grid[i, j] < 0.55 else "black"  # cividis is dark below ~0.55
            ax.text(j, i, f"{num(grid[i, j])}\n±{num(half[i, j])}", ha="center", va="center", fontsize=9,
                    color=ink, linespacing=1.1)
        ax.set_xticks(range(len(benchmarks)), [b.replace("_", " ") for b in benchmarks], rotation=35, ha="right",
                      rotation_mode="anchor")
        ax.set_yticks(range(len(runs)), [labels[r] for r in runs])
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
        bar.set_label("mean score (0–1)")
        ax.set_title("Mean score per benchmark (±: half width of the 95% interval)")
    return fig


def _hatched(x: float, y: float):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=LIGHT, edgecolor="white", hatch="//", linewidth=0)
