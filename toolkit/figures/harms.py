"""Harms of the safety benchmarks: severe omission against severe commission, precision against recall."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from toolkit.figures.palette import Palette, completed, in_palette_order, run_marker
from toolkit.figures.style import GREY, LIGHT, grey, laid_out, marker, new_figure, rows_height, short_labels, styled

BOTH = "both"  # toolkit.analysis.harms.BOTH: the two safety benchmarks pooled
HARM_METRICS = ("severe_omission_case_rate", "severe_commission_case_rate")
TITLES = {"severe_omission_case_rate": "Severe omission\n(cases missing a +3 item)",
          "severe_commission_case_rate": "Severe commission\n(cases endorsing a −3 item)"}
# The rates are as ``harms()`` defines them: over the cases that can have the event when the frame
# says so (a ``denominator`` column), the subtitle then says which cases count.


def _check(harm: pl.DataFrame, metrics: tuple[str, ...], what: str) -> None:
    missing = [m for m in metrics if m not in set(harm["metric"].unique().to_list())] if harm.height else list(metrics)
    if missing:
        raise ValueError(f"{what}: the harms frame has no {', '.join(missing)} rows")


def _with_ci(frame: pl.DataFrame) -> pl.DataFrame:
    for column in ("ci_low", "ci_high"):
        if column not in frame.columns:  # harms(resamples=None) gives no intervals
            frame = frame.with_columns(pl.lit(None, pl.Float64).alias(column))
    return frame


def _in_order(frame: pl.DataFrame, palette: Palette | None) -> pl.DataFrame:
    """Rows grouped by run in the palette's (leaderboard) order; without one, in the frame's (store) order."""
    runs = frame["run_id"].unique(maintain_order=True).to_list()
    order = {r: i for i, r in enumerate(runs if palette is None else in_palette_order(palette, runs))}
    return frame.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64), maintain_order=True)


def harm_rates_data(harm: pl.DataFrame, palette: Palette | None = None) -> pl.DataFrame:
    """The severe omission and commission case-rate rows of ``harms()`` (every scope), runs in the palette's
    order (``palette_for``: the leaderboard's), else the frame's."""
    _check(harm, HARM_METRICS, "harm_rates")
    extra = ["denominator"] if "denominator" in harm.columns else []
    return _in_order(_with_ci(harm).filter(pl.col("metric").is_in(HARM_METRICS)).select(
        "run_id", "scope", "metric", "value", "n_cases", *extra, "ci_low", "ci_high"), palette)


@laid_out
def harm_rates(harm: pl.DataFrame, palette: Palette | None = None, *, twin: pl.DataFrame | None = None) -> Figure:
    """Per run, one panel per metric: the rate with its 95% interval for each safety benchmark and both pooled.
    Colours tell the benchmarks apart (not the runs); runs in the palette's order."""
    frame = harm_rates_data(harm, palette) if twin is None else twin
    runs = frame["run_id"].unique(maintain_order=True).to_list()
    labels = short_labels(runs)
    scopes = sorted(frame["scope"].unique().to_list(), key=lambda s: (s == BOTH, s))
    y = np.arange(len(runs))
    step = 0.6 / max(len(scopes), 1)
    with styled():
        fig = new_figure(rows_height(len(runs), base=2.0, per_row=0.22 + 0.1 * len(scopes)))
        axes = fig.subplots(1, len(HARM_METRICS), sharey=True)
        for ax, metric in zip(axes, HARM_METRICS):
            part = frame.filter(pl.col("metric") == metric)
            for k, scope in enumerate(scopes):
                rows = part.filter(pl.col("scope") == scope)
                index = {r: i for i, r in enumerate(runs)}
                yy = np.array([index[r] for r in rows["run_id"].to_list()], dtype=float) + (k - (len(scopes) - 1) / 2) * step
                value = rows["value"].to_numpy().astype(float)
                lo, hi = rows["ci_low"].to_numpy().astype(float), rows["ci_high"].to_numpy().astype(float)
                ok = ~(np.isnan(lo) | np.isnan(hi) | np.isnan(value))
                ink = "#000000" if scope == BOTH else grey(k)
                ax.hlines(yy[ok], lo[ok], hi[ok], color=ink, linewidth=1.6, alpha=0.6)
                ax.scatter(value, yy, color=ink, marker="D" if scope == BOTH else marker(k), s=28, zorder=3,
                           label="both pooled" if scope == BOTH else scope.replace("_", " "))
            ax.set_xlim(-0.03, 1.03)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
            ax.set_title(TITLES[metric], fontsize=10)
            ax.set_xlabel("share of cases, 95% interval")
            ax.grid(axis="x")
        axes[0].set_yticks(y, [labels[r] for r in runs])
        axes[0].set_ylim(len(runs) - 0.5, -0.5)
        for i in range(1, len(runs), 2):  # banded rows keep a run's markers together
            for ax in axes:
                ax.axhspan(i - 0.5, i + 0.5, color=LIGHT, alpha=0.35, zorder=0, linewidth=0)
        fig.suptitle("Severe harms on the safety benchmarks")
        if "denominator" in frame.columns:
            for ax, what in zip(axes, ("+3", "−3")):
                ax.set_xlabel(f"share of cases with a {what} item, 95% CI")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=len(scopes))
    return fig


def precision_recall_data(harm: pl.DataFrame, palette: Palette | None = None) -> pl.DataFrame:
    """Per run (pooled scope "both" when present, else each scope): precision and recall with intervals, F1;
    runs in the palette's order, else the frame's."""
    _check(harm, ("precision", "recall"), "precision_recall")
    frame = _with_ci(harm).filter(pl.col("metric").is_in(["precision", "recall", "f1"]))
    if BOTH in set(frame["scope"].to_list()):
        frame = frame.filter(pl.col("scope") == BOTH)
    runs = _in_order(frame, palette)["run_id"].unique(maintain_order=True).to_list()
    wide = frame.pivot(on="metric", index=["run_id", "scope"], values=["value", "ci_low", "ci_high"],
                       aggregate_function="first")
    names = {f"value_{m}": m for m in ("precision", "recall", "f1")}
    names |= {f"{b}_{m}": f"{m}_{b}" for m in ("precision", "recall") for b in ("ci_low", "ci_high")}
    wide = wide.rename({k: v for k, v in names.items() if k in wide.columns})
    for column in ("precision", "recall", "f1", "precision_ci_low", "precision_ci_high", "recall_ci_low",
                   "recall_ci_high"):
        if column not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(column))
    order = {r: i for i, r in enumerate(runs)}
    return wide.select("run_id", "scope", "precision", "precision_ci_low", "precision_ci_high", "recall",
                       "recall_ci_low", "recall_ci_high", "f1").sort(
        pl.col("run_id").replace_strict(order, return_dtype=pl.Int64), "scope")


@laid_out
def precision_recall(harm: pl.DataFrame, palette: Palette | None = None, *, twin: pl.DataFrame | None = None) -> Figure:
    """Weighted recall (x) against weighted precision (y) per run in its colour, 95% intervals as crosses,
    F1 contours."""
    frame = precision_recall_data(harm, palette) if twin is None else twin
    runs = frame["run_id"].unique(maintain_order=True).to_list()
    colours = completed(palette, runs)
    many = len(runs) > 8
    labels = short_labels(runs, width=22 if many else 28)
    with styled():
        fig = new_figure(6.0 + (0.18 * -(-len(runs) // 3) if many else 0))
        ax = fig.subplots()
        grid = np.linspace(0.01, 1, 200)
        px, py = np.meshgrid(grid, grid)
        f1 = 2 * px * py / (px + py)
        contours = ax.contour(px, py, f1, levels=[0.2, 0.4, 0.6, 0.8, 0.9], colors=GREY, linewidths=0.6, alpha=0.7)
        ax.clabel(contours, fmt=lambda v: f"F1 {v:.1f}", fontsize=9)
        for i, row in enumerate(frame.iter_rows(named=True)):
            run = row["run_id"]
            k = runs.index(run)
            x, y = row["recall"], row["precision"]
            if x is None or y is None:
                continue
            ink = colours[run]
            if row["recall_ci_low"] is not None and row["recall_ci_high"] is not None:
                ax.hlines(y, row["recall_ci_low"], row["recall_ci_high"], color=ink, linewidth=1.4, alpha=0.7)
            if row["precision_ci_low"] is not None and row["precision_ci_high"] is not None:
                ax.vlines(x, row["precision_ci_low"], row["precision_ci_high"], color=ink, linewidth=1.4, alpha=0.7)
            name = f"{k + 1}  {labels[run]}" if many else labels[run]
            if frame["scope"].n_unique() > 1:
                name += f" ({row['scope'].replace('_', ' ')})"
            ax.scatter([x], [y], color=ink, marker=run_marker(colours, run), s=50, zorder=3, edgecolor="#404040", linewidth=0.4,
                       label=name)
            if many:
                ax.annotate(str(k + 1), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=9)
        # Zoom on the runs (both axes alike, so F1 contours keep their shape), never beyond [0, 1].
        ends = frame.select(pl.min_horizontal("precision", "recall", "precision_ci_low", "recall_ci_low"))
        low = ends.to_series().min() if ends.height else None
        low = 0.0 if low is None else max(0.0, float(low) - 0.08)
        ax.set_xlim(low, 1.01)
        ax.set_ylim(low, 1.01)
        ax.set_aspect("equal")
        ax.set_xlabel("weighted recall (credited weight / all positive weight)")
        ax.set_ylabel("weighted precision (credited / all endorsed weight)")
        scope = "both safety benchmarks pooled" if frame["scope"][0] == BOTH else "per safety benchmark"
        ax.set_title(f"Precision against recall, {scope}", fontsize=10)
        handles = [c for c in ax.collections if isinstance(c, PathCollection)]
        if many:
            fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncol=3,
                       handletextpad=0.3, columnspacing=1.0)
        else:
            ax.legend(handles, [h.get_label() for h in handles], loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig
