"""Reliability at k: each run's worst-at-k curve (the expected lowest score among k answers to a case) with its
95% intervals, from a ``VarianceBudget`` (``toolkit.analysis.variance``)."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from toolkit.analysis.variance import OVERALL, VarianceBudget
from toolkit.figures.palette import Palette, completed, run_marker
from toolkit.figures.style import GREY, laid_out, new_figure, short_labels, styled


def worst_at_k_data(budget: VarianceBudget, palette: Palette | None = None) -> pl.DataFrame:
    """One row per run x k (overall, macro over benchmarks): worst-at-k, its interval and the run's label;
    runs in the palette's order (else the budget's), k ascending."""
    rows = budget.worst_at_k.filter(pl.col("benchmark") == OVERALL)
    if rows.is_empty():
        raise ValueError("worst_at_k: no run to draw")
    order = {r: i for i, r in enumerate(completed(palette, rows["run_id"].unique(maintain_order=True).to_list()))}
    labels = short_labels(list(order))
    return rows.select("run_id", "k", "value", "ci_low", "ci_high").with_columns(
        label=pl.col("run_id").replace_strict(labels, return_dtype=pl.String)).sort(
        pl.col("run_id").replace_strict(order, return_dtype=pl.Int64), "k", maintain_order=True)


@laid_out
def worst_at_k(budget: VarianceBudget, palette: Palette | None = None, *, twin: pl.DataFrame | None = None
               ) -> Figure:
    """Worst-at-k against k per run, in the run's colour: k = 1 is the run's mean, a steep fall says its answers
    to one case disagree. Bars are 95% intervals (cases resampled); a run asked once per case is one point."""
    frame = worst_at_k_data(budget, palette) if twin is None else twin
    runs = frame["run_id"].unique(maintain_order=True).to_list()
    colours = completed(palette, runs)
    top = int(frame["k"].max())
    with styled():
        fig = new_figure(3.8)
        ax = fig.subplots()
        step = 0.08 if len(runs) > 1 else 0.0
        for i, run in enumerate(runs):
            part = frame.filter(pl.col("run_id") == run)
            k = part["k"].to_numpy().astype(float) + (i - (len(runs) - 1) / 2) * step
            value = part["value"].to_numpy().astype(float)
            lo, hi = part["ci_low"].to_numpy().astype(float), part["ci_high"].to_numpy().astype(float)
            ok = ~(np.isnan(lo) | np.isnan(hi))
            ink = colours[run]
            ax.vlines(k[ok], lo[ok], hi[ok], color=ink, linewidth=1.6, alpha=0.55)
            ax.plot(k, value, color=ink, marker=run_marker(colours, run), markersize=5, linewidth=1.4,
                    label=part["label"][0])
        ax.set_xticks(range(1, top + 1))
        ax.set_xlim(0.5, top + 0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.axhline(0, color=GREY, linewidth=0.6)
        ax.set_xlabel("k (answers to one case)")
        ax.set_ylabel("worst-at-k (macro mean)")
        ax.grid(axis="y")
        ax.set_title("Worst score among k answers, 95% intervals")
        ax.legend(loc="best", fontsize=9)
    return fig
