"""Paired comparisons: the forest of differences, the win-fraction and delta matrices, one pair's cases."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from toolkit.analysis.compare import Comparison
from toolkit.analysis.paired import TIE
from toolkit.analysis.pairs import OVERALL
from toolkit.figures.style import (DIVERGING, GREY, LIGHT, MARKERS, SEQUENTIAL, colour, laid_out,
                                   new_figure, num, rows_height, short_labels, styled)

ALPHA = 0.05  # Holm-adjusted p below this is marked significant
FOREST_TOP = 40  # pairs shown at most; the rest are left out by |delta| and the title says so
ANNOTATE_MAX = 10  # runs up to which matrix cells carry their numbers
INK = "#262626"


def _need_pairs(cmp: Comparison, what: str) -> None:
    runs = cmp.leaderboard["run_id"].to_list()
    if len(runs) < 2:
        raise ValueError(f"{what}: needs two or more runs to compare (got {len(runs)}: {', '.join(runs) or 'none'})")


def pairwise_forest_data(cmp: Comparison, baseline: str | None = None) -> pl.DataFrame:
    """The overall pairwise rows drawn in the forest, as ``cmp.pairwise`` gives them, in plotting order.

    The comparison has oriented them already: every pair as (better, worse), or with ``cmp.baseline``
    each other run against it (other - baseline), with Holm over that family. ``baseline``, if given,
    must be the comparison's own (a figure never re-orients). Pairs without a common case are left out.
    ``shown`` marks the rows drawn: the ``FOREST_TOP`` largest |delta| when there are more.
    """
    _need_pairs(cmp, "pairwise_forest")
    if baseline is not None and baseline != cmp.baseline:
        raise ValueError(f"pairwise_forest: baseline {baseline!r} is not the comparison's baseline "
                         f"({cmp.baseline!r}); compare with CompareOptions(baseline={baseline!r})")
    rows = cmp.pairwise.filter(pl.col("benchmark") == OVERALL)
    labels = short_labels(cmp.leaderboard["run_id"].to_list(), width=22)
    out = rows.filter(pl.col("delta").is_not_null()).select(
        "run_a", "run_b", "n_cases", "mean_a", "mean_b", "delta", "ci_low", "ci_high", "p_value", "p_holm",
        (pl.col("p_holm") < ALPHA).fill_null(False).alias("significant"),
    ).with_columns(
        label=pl.format("{} − {}", pl.col("run_a").replace_strict(labels), pl.col("run_b").replace_strict(labels)))
    keep = out.with_row_index("_i").sort(pl.col("delta").abs(), "_i", descending=[True, False]).head(FOREST_TOP)
    return out.with_columns(shown=pl.Series(np.isin(np.arange(out.height), keep["_i"].to_numpy()))).sort(
        "delta", descending=True, maintain_order=True)


@laid_out
def pairwise_forest(cmp: Comparison, baseline: str | None = None, *, twin: pl.DataFrame | None = None) -> Figure:
    """Overall paired differences with 95% intervals; filled markers: Holm-adjusted p < 0.05.

    Raises ValueError with fewer than two runs or an unknown baseline.
    """
    frame = pairwise_forest_data(cmp, baseline) if twin is None else twin
    total = frame.height
    shown = frame.filter(pl.col("shown"))
    n = shown.height
    y = np.arange(n)
    with styled():
        fig = new_figure(rows_height(n, base=1.8))
        ax = fig.subplots()
        delta = shown["delta"].to_numpy().astype(float)
        lo = shown["ci_low"].to_numpy().astype(float)
        hi = shown["ci_high"].to_numpy().astype(float)
        sig = shown["significant"].to_numpy()
        ok = ~(np.isnan(lo) | np.isnan(hi))
        # Ink, not run colours: colours mean runs in every figure, and a pair is two runs.
        ink = np.where(sig, INK, GREY)
        ax.hlines(y[ok], lo[ok], hi[ok], colors=ink[ok], linewidth=2, alpha=0.7)
        ax.scatter(delta[sig], y[sig], marker="o", s=40, color=INK, zorder=3,
                   label="significant (Holm-adjusted p < 0.05)")
        ax.scatter(delta[~sig], y[~sig], marker="o", s=40, facecolor="white", edgecolor=GREY, linewidth=1.5,
                   zorder=3, label="not significant")
        ax.axvline(0, color=GREY, linewidth=1, linestyle="--")
        ax.set_yticks(y, shown["label"].to_list())
        ax.set_ylim(n - 0.5, -0.5)
        ax.grid(axis="x")
        # The numbers on the right, one line per pair.
        right = ax.twinx()
        right.set_ylim(ax.get_ylim())
        right.set_yticks(y, [f"{num(d)} [{num(a)}, {num(b)}]  p{_p(p)}" for d, a, b, p in
                             shown.select("delta", "ci_low", "ci_high", "p_holm").iter_rows()])
        right.tick_params(axis="y", length=0)
        right.spines["right"].set_visible(False)
        against = f"each run − {short_labels([baseline])[baseline]}" if baseline else "A − B (better first)"
        ax.set_xlabel(f"difference in overall score, {against}, 95% interval")
        title = "Paired differences in overall score"
        if n < total:
            title += f": the {n} largest |Δ| of {total} pairs"
        ax.set_title(title, loc="left")
        right.text(1.0, 1.0, "Δ [95% interval]  Holm p", transform=ax.transAxes, ha="left", va="bottom",
                   fontsize=9)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, handletextpad=0.3)
    return fig


def _p(p: float | None) -> str:
    if p is None or p != p:
        return "–"
    return "<0.001" if p < 0.001 else f"={p:.3f}"


def win_delta_matrix_data(cmp: Comparison, cases: pl.DataFrame) -> pl.DataFrame:
    """One row per ordered pair of compared runs (row run, column run): common cases, wins, ties,
    losses and win fraction (share of common cases where the row run scores higher, from ``cases``),
    and the overall delta row - column with its Holm-adjusted p (from ``cmp.pairwise``)."""
    _need_pairs(cmp, "win_delta_matrix")
    runs = cmp.leaderboard["run_id"].to_list()
    scores = cases.filter(pl.col("run_id").is_in(runs) & pl.col("score").is_not_nan()).select(
        "run_id", "benchmark", "case_id", "score")
    joined = scores.join(scores, on=["benchmark", "case_id"], suffix="_col").filter(
        pl.col("run_id") != pl.col("run_id_col"))
    diff = pl.col("score") - pl.col("score_col")
    counts = joined.group_by("run_id", "run_id_col").agg(
        pl.len().cast(pl.Int64).alias("n_common"), (diff > TIE).sum().cast(pl.Int64).alias("wins"),
        (diff.abs() <= TIE).sum().cast(pl.Int64).alias("ties"), (diff < -TIE).sum().cast(pl.Int64).alias("losses"))
    overall = cmp.pairwise.filter(pl.col("benchmark") == OVERALL).select("run_a", "run_b", "delta", "p_holm")
    both = pl.concat([overall, overall.select(pl.col("run_b").alias("run_a"), pl.col("run_a").alias("run_b"),
                                              -pl.col("delta"), "p_holm")])
    order = {r: i for i, r in enumerate(runs)}
    grid = pl.DataFrame({"row": [a for a in runs for b in runs if a != b],
                         "column": [b for a in runs for b in runs if a != b]})
    return grid.join(counts.rename({"run_id": "row", "run_id_col": "column"}), on=["row", "column"], how="left").join(
        both.rename({"run_a": "row", "run_b": "column"}), on=["row", "column"], how="left").with_columns(
        pl.col("n_common", "wins", "ties", "losses").fill_null(0),
        win_fraction=pl.col("wins") / pl.when(pl.col("n_common") > 0).then(pl.col("n_common")),
        significant=(pl.col("p_holm") < ALPHA).fill_null(False),
    ).sort(pl.col("row").replace_strict(order), pl.col("column").replace_strict(order))


@laid_out
def win_delta_matrix(cmp: Comparison, cases: pl.DataFrame, *, twin: pl.DataFrame | None = None) -> Figure:
    """Win fraction (left or top) next to the overall delta matrix (row run - column run); "*" marks
    Holm-adjusted p < 0.05. Runs in leaderboard order. Raises ValueError with fewer than two runs."""
    frame = win_delta_matrix_data(cmp, cases) if twin is None else twin
    runs = cmp.leaderboard["run_id"].to_list()
    labels = short_labels(runs, width=22)
    n = len(runs)
    index = {r: i for i, r in enumerate(runs)}
    win = np.full((n, n), np.nan)
    delta = np.full((n, n), np.nan)
    star = np.zeros((n, n), bool)
    for row, column, w, d, s in frame.select("row", "column", "win_fraction", "delta", "significant").iter_rows():
        i, j = index[row], index[column]
        win[i, j] = np.nan if w is None else w
        delta[i, j] = np.nan if d is None else d
        star[i, j] = s
    stacked = n > 12
    annotate = n <= ANNOTATE_MAX
    with styled():
        label_width = 0.075 * max(len(v) for v in labels.values()) + 0.3  # inches of tick labels at 9 pt
        if stacked:  # one matrix above the other, 0.2 in a cell
            square = 0.2 * n
            fig = new_figure(2 * (square + 0.9 * label_width + 0.9), width=max(8.0, square + label_width + 1.2))
        else:  # side by side: the width decides the size of the squares
            square = (8.0 - 2 * label_width - 1.4) / 2
            fig = new_figure(square + 0.75 * label_width + 1.1)
        axes = fig.subplots(2, 1) if stacked else fig.subplots(1, 2)
        limit = max(0.05, float(np.nanmax(np.abs(delta)))) if np.isfinite(delta).any() else 1.0
        panels = ((axes[0], win, "Win fraction: share of common cases\nwhere the row run scores higher", SEQUENTIAL, 0, 1),
                  (axes[1], delta, "Δ overall score (row − column)\n* Holm-adjusted p < 0.05", DIVERGING, -limit, limit))
        for ax, values, title, cmap, vmin, vmax in panels:
            ax.set_facecolor(LIGHT)
            image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
            ax.set_xticks(range(n), [labels[r] for r in runs], rotation=90 if stacked else 45, ha="right",
                          va="center" if stacked else "top", rotation_mode="anchor")
            for i in range(n):  # the diagonal: a run against itself
                ax.add_patch(Rectangle((i - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="none"))
            ax.set_yticks(range(n), [labels[r] for r in runs])
            ax.tick_params(length=0, labelsize=9)
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.set_title(title, fontsize=10)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03, shrink=0.8)
            for i, j in np.argwhere(np.isfinite(values)):
                mark = "*" if values is delta and star[i, j] else ""
                if annotate:
                    text = f"{values[i, j]:.2f}{mark}" if values is delta else f"{values[i, j]:.2f}"
                elif mark:
                    text = mark
                else:
                    continue
                if values is win:
                    dark = values[i, j] < 0.55  # cividis is dark below ~0.55
                else:
                    dark = abs(values[i, j]) > 0.6 * vmax
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if dark else "black")
    return fig


def pair_scatter_data(cases: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """The cases both runs completed: benchmark, case_id, score_a, score_b (NaN scores left out)."""
    if run_a == run_b:
        raise ValueError(f"pair_scatter: run_a and run_b are the same run ({run_a!r})")
    known = set(cases["run_id"].unique().to_list())
    for run in (run_a, run_b):
        if run not in known:
            raise ValueError(f"pair_scatter: run {run!r} has no case in the frame (runs: {', '.join(sorted(known))})")
    pick = cases.filter(pl.col("score").is_not_nan()).select("run_id", "benchmark", "case_id", "score")
    a = pick.filter(pl.col("run_id") == run_a).drop("run_id").rename({"score": "score_a"})
    b = pick.filter(pl.col("run_id") == run_b).drop("run_id").rename({"score": "score_b"})
    return a.join(b, on=["benchmark", "case_id"]).sort("benchmark", "case_id")


@laid_out
def pair_scatter(cases: pl.DataFrame, run_a: str, run_b: str, *, twin: pl.DataFrame | None = None) -> Figure:
    """Per-case scores of ``run_a`` (x) against ``run_b`` (y) on their common cases, one marker per benchmark.

    Raises ValueError when a run is unknown, the two are the same, or they share no case.
    """
    frame = pair_scatter_data(cases, run_a, run_b) if twin is None else twin
    if frame.is_empty():
        raise ValueError(f"pair_scatter: {run_a} and {run_b} share no completed case")
    labels = short_labels([run_a, run_b])
    a, b = frame["score_a"].to_numpy(), frame["score_b"].to_numpy()
    above, below = int((a - b > TIE).sum()), int((b - a > TIE).sum())
    with styled():
        fig = new_figure(6.0)
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=1, zorder=1)
        for k, bench in enumerate(sorted(frame["benchmark"].unique().to_list())):
            part = frame.filter(pl.col("benchmark") == bench)
            ax.scatter(part["score_a"], part["score_b"], s=40, alpha=0.8, color=colour(k), marker=MARKERS[k % len(MARKERS)],
                       edgecolor="#404040", linewidth=0.4, label=bench.replace("_", " "), zorder=2)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
        ax.set_xlabel(f"{labels[run_a]}: case score")
        ax.set_ylabel(f"{labels[run_b]}: case score")
        ax.set_title(f"Per-case scores on {frame.height} common cases\n"
                     f"{labels[run_a]} higher on {above}, {labels[run_b]} higher on {below}, "
                     f"tied on {frame.height - above - below}", fontsize=10)
        ax.legend(title="benchmark", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig
