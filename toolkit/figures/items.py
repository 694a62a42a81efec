"""Rubric items: the high-severity positive items runs miss most, the harmful items they endorse most."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from toolkit.analysis.items import ItemAnalysis
from toolkit.figures.style import BLUE, VERMILLION, laid_out, new_figure, pct, styled, wrap

HIGH_SEVERITY = 2  # positive items worth at least this many points (+2/+3: the rubrics' most important)
ITEM_ROW = 0.55  # inches per item: two lines of item text


def item_rates_data(items: ItemAnalysis, top: int = 10) -> pl.DataFrame:
    """Rows drawn: kind ("missed": positive items of >= HIGH_SEVERITY points by miss rate; "endorsed":
    negative items by endorsement rate, more harmful first on ties), the item's facts and ``rate``
    with its interval when the analysis computed one (miss interval = 1 - match interval)."""
    frame = items.items
    has_ci = "ci_low" in frame.columns
    ci = [pl.col("ci_low"), pl.col("ci_high")] if has_ci else [pl.lit(None, pl.Float64)] * 2
    keep = ("item_id", "benchmark", "case_id", "points", "severity_class", "n_runs", "text")
    missed = frame.filter(pl.col("points") >= HIGH_SEVERITY).select(
        pl.lit("missed").alias("kind"), *keep, (1 - pl.col("match_rate")).alias("rate"),
        (1 - ci[1]).alias("ci_low"), (1 - ci[0]).alias("ci_high"),
    ).sort(["rate", "points", "item_id"], descending=[True, True, False], nulls_last=True).head(top)
    endorsed = frame.filter(pl.col("points") < 0).select(
        pl.lit("endorsed").alias("kind"), *keep, pl.col("match_rate").alias("rate"),
        ci[0].alias("ci_low"), ci[1].alias("ci_high"),
    ).sort(["rate", "points", "item_id"], descending=[True, False, False], nulls_last=True).head(top)
    return pl.concat([missed, endorsed])


@laid_out
def item_rates(items: ItemAnalysis, top: int = 10, *, twin: pl.DataFrame | None = None) -> Figure:
    """Two panels of horizontal bars: the ``top`` most-missed high-severity positive items (share of
    runs missing each) and the ``top`` most-endorsed harmful items, labelled with their text."""
    frame = item_rates_data(items, top) if twin is None else twin
    if frame.is_empty():
        raise ValueError("item_rates: no positive item of +2 or more points and no negative item to show")
    parts = [(kind, frame.filter(pl.col("kind") == kind)) for kind in ("missed", "endorsed")]
    parts = [(kind, part) for kind, part in parts if part.height]
    total_rows = sum(part.height for _, part in parts)
    with styled():
        fig = new_figure(1.2 + 1.0 * len(parts) + ITEM_ROW * total_rows)
        axes = np.atleast_1d(fig.subplots(len(parts), 1, height_ratios=[max(p.height, 1) for _, p in parts],
                                          squeeze=False)[:, 0])
        for ax, (kind, part) in zip(axes, parts):
            rate = part["rate"].to_numpy().astype(float)
            y = np.arange(part.height)
            ink = BLUE if kind == "missed" else VERMILLION
            ax.barh(y, np.nan_to_num(rate), color=ink, alpha=0.75, height=0.6)
            lo = part["ci_low"].to_numpy().astype(float)
            hi = part["ci_high"].to_numpy().astype(float)
            ok = ~(np.isnan(lo) | np.isnan(hi))
            if ok.any():
                ax.errorbar(rate[ok], y[ok], xerr=[rate[ok] - lo[ok], hi[ok] - rate[ok]], fmt="none", ecolor="#404040",
                            capsize=2, linewidth=1)
            for yi, value, n in zip(y, rate, part["n_runs"].to_list()):
                inside = np.nan_to_num(value) > 0.8  # a long bar carries its number inside, clear of the edge
                ax.text(np.nan_to_num(value) + (-0.01 if inside else 0.01), yi, f"{pct(value)} of {n}", va="center",
                        ha="right" if inside else "left", fontsize=9, color="white" if inside else "black",
                        zorder=4)
            labels = [f"{wrap(text, 52, 2)}\n[{bench.replace('_', ' ')}, {points:+g}]" for text, bench, points in
                      part.select("text", "benchmark", "points").iter_rows()]
            ax.set_yticks(y, labels, fontsize=9, linespacing=1.0)
            ax.set_ylim(part.height - 0.5, -0.5)
            ax.set_xlim(0, 1.15)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
            ax.grid(axis="x")
            if kind == "missed":
                ax.set_title(f"Most-missed high-severity items (≥ +{HIGH_SEVERITY} points)")
                ax.set_xlabel("share of runs missing the item" + (" (95% interval)" if ok.any() else ""))
            else:
                ax.set_title("Most-endorsed harmful items (negative points)")
                ax.set_xlabel("share of runs endorsing the item" + (" (95% interval)" if ok.any() else ""))
    return fig
