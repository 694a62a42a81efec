"""Judge agreement: per benchmark, how far raters (judge x pass) of a run move its score; item-level agreement."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from toolkit.analysis.agreement import Agreement
from toolkit.figures.palette import Palette, completed
from toolkit.figures.style import (DIVERGING, GREY, LIGHT, MARKERS, grey, laid_out, new_figure, num, rows_height,
                                   short_labels, styled)

ALPHA = 0.05
FOREST_SERIES = 6  # run x rater pairs drawn as a dodged forest; more become a heatmap
STATISTICS = ("percent_agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha")


def _run_order(agreement: Agreement, palette: Palette | None) -> dict[str, int]:
    """Runs of the agreement in the palette's (leaderboard) order, else as the analysis lists them."""
    runs = agreement.summary["run_id"].to_list() + agreement.scores["run_id"].to_list()
    return {r: i for i, r in enumerate(completed(palette, runs))}


def judge_agreement_data(agreement: Agreement, palette: Palette | None = None) -> pl.DataFrame:
    """One row per run x rater pair x scope (each benchmark, then "overall"): the score difference
    rater_a - rater_b with its interval and Holm-adjusted p (``agreement.scores``), plus a series label;
    runs in the palette's order."""
    scores = agreement.scores
    if scores.is_empty():
        raise ValueError("judge_agreement: needs a run with two or more judge passes or judges; "
                         "every run here has a single pass and judge")
    order = _run_order(agreement, palette)
    runs = short_labels(list(order), width=20)
    return scores.select(
        "run_id", "rater_a", "rater_b", "benchmark", "n_cases", "delta", "ci_low", "ci_high", "p_holm",
        (pl.col("p_holm") < ALPHA).fill_null(False).alias("significant"),
    ).with_columns(series=pl.format("{}: {} − {}", pl.col("run_id").replace_strict(runs), "rater_a", "rater_b")).sort(
        pl.col("run_id").replace_strict(order, return_dtype=pl.Int64), "rater_a", "rater_b",
        pl.col("benchmark") == "overall", "benchmark", maintain_order=True)


@laid_out
def judge_agreement(agreement: Agreement, palette: Palette | None = None,
                    *, twin: pl.DataFrame | None = None) -> Figure:
    """Left: per benchmark, the score difference between raters with 95% intervals (a heatmap when there
    are more than 6 run x rater pairs); right: item-level agreement per run (percent, kappa, alpha).

    Each series is drawn in its run's palette colour (its marker tells a run's rater pairs apart).
    Raises ValueError when no run has two or more raters.
    """
    frame = judge_agreement_data(agreement, palette) if twin is None else twin
    order = _run_order(agreement, palette)
    colours = completed(palette, list(order))
    series = frame["series"].unique(maintain_order=True).to_list()
    series_run = dict(frame.select("series", "run_id").unique(maintain_order=True).iter_rows())
    shapes = {name: MARKERS[[n for n in series if series_run[n] == series_run[name]].index(name) % len(MARKERS)]
              for name in series}
    scopes = frame["benchmark"].unique(maintain_order=True).to_list()
    scopes = [s for s in scopes if s != "overall"] + (["overall"] if "overall" in scopes else [])
    summary = agreement.summary.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64),
                                     maintain_order=True)
    run_labels = short_labels(summary["run_id"].to_list(), width=20)
    forest = len(series) <= FOREST_SERIES
    rows = len(scopes) if forest else len(series)
    with styled():
        fig = new_figure(max(rows_height(rows, base=2.2, per_row=0.32 if forest else 0.3),
                             rows_height(summary.height, base=2.2)))
        left, right = fig.subplots(1, 2, width_ratios=[2.2, 1])
        y = np.arange(len(scopes))
        if forest:
            step = 0.6 / len(series)
            for k, name in enumerate(series):
                part = frame.filter(pl.col("series") == name)
                index = {s: i for i, s in enumerate(scopes)}
                yy = np.array([index[s] for s in part["benchmark"].to_list()], float) + (k - (len(series) - 1) / 2) * step
                d = part["delta"].to_numpy().astype(float)
                lo, hi = part["ci_low"].to_numpy().astype(float), part["ci_high"].to_numpy().astype(float)
                ok = ~(np.isnan(lo) | np.isnan(hi))
                ink = colours[series_run[name]]
                left.hlines(yy[ok], lo[ok], hi[ok], color=ink, linewidth=1.6, alpha=0.6)
                sig = part["significant"].to_numpy()
                left.scatter(d[~sig], yy[~sig], s=28, facecolor="white", edgecolor=ink, marker=shapes[name],
                             linewidth=1.3, zorder=3, label=name)
                left.scatter(d[sig], yy[sig], s=28, color=ink, marker=shapes[name], zorder=3)
            left.axvline(0, color=GREY, linestyle="--", linewidth=1)
            left.set_yticks(y, [s.replace("_", " ") for s in scopes])
            left.set_ylim(len(scopes) - 0.5, -0.5)
            left.set_xlabel("score difference between raters, 95% interval\n(filled: Holm-adjusted p < 0.05)")
            left.grid(axis="x")
            fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncol=min(len(series), 2))
        else:
            grid = np.full((len(series), len(scopes)), np.nan)
            star = np.zeros_like(grid, dtype=bool)
            si, bi = {s: i for i, s in enumerate(series)}, {s: j for j, s in enumerate(scopes)}
            for name, bench, d, s in frame.select("series", "benchmark", "delta", "significant").iter_rows():
                grid[si[name], bi[bench]] = np.nan if d is None else d
                star[si[name], bi[bench]] = s
            limit = max(0.05, float(np.nanmax(np.abs(grid)))) if np.isfinite(grid).any() else 1.0
            left.set_facecolor(LIGHT)
            image = left.imshow(np.ma.masked_invalid(grid), cmap=DIVERGING, vmin=-limit, vmax=limit, aspect="auto")
            for i, j in np.argwhere(star):
                left.text(j, i, "*", ha="center", va="center", fontsize=10)
            left.set_xticks(range(len(scopes)), [s.replace("_", " ") for s in scopes], rotation=40, ha="right",
                            rotation_mode="anchor")
            left.set_yticks(range(len(series)), series, fontsize=9)
            bar = fig.colorbar(image, ax=left, fraction=0.05, pad=0.02)
            bar.set_label("rater a − rater b (* Holm p < 0.05)")
        left.set_title("Rater score difference per benchmark", fontsize=10)
        _summary_panel(right, summary, run_labels)
        fig.suptitle("Judge agreement")
    return fig


def _summary_panel(ax, summary: pl.DataFrame, labels: dict[str, str]) -> None:
    """Item-level agreement statistics per run as dots on a common -1..1 scale."""
    y = np.arange(summary.height)
    step = 0.6 / len(STATISTICS)
    for k, stat in enumerate(STATISTICS):
        if stat not in summary.columns:
            continue
        values = summary[stat].to_numpy().astype(float)
        ax.scatter(values, y + (k - 1.5) * step, color=grey(k), marker=MARKERS[k], s=26, zorder=3,
                   label=stat.replace("_", " "))
    ax.axvline(0, color=GREY, linestyle="--", linewidth=1)
    values = summary.select([c for c in STATISTICS if c in summary.columns]).to_numpy().astype(float)
    low = float(np.nanmin(values)) if np.isfinite(values).any() else 0.0
    ax.set_xlim(-1.05 if low < -0.05 else -0.05, 1.05)  # kappa and alpha can be negative
    ax.set_yticks(y, [f"{labels[r]}\n({n} raters)" for r, n in summary.select("run_id", "raters").iter_rows()],
                  fontsize=9)
    ax.set_ylim(summary.height - 0.5, -0.5)
    ax.grid(axis="x")
    ax.set_title("Item-level agreement", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=9)
    ax.set_xlabel(f"agreement (items: {num(float(summary['items'].sum()), 0)})")
