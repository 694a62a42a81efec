"""Figures of a comparison: matplotlib functions over the analysis frames, each returning a ``Figure``.

    from toolkit import figures
    fig = figures.leaderboard(cmp)            # cmp = toolkit.compare(...) or compare_data(...)
    figures.save_png(fig, "leaderboard.png")  # or figures.png_bytes(fig), figures.svg_text(fig)

One colour and one place per run everywhere: ``palette = figures.palette_for(cmp)`` (leaderboard order,
Okabe-Ito for up to 8 runs, cividis rank shades beyond) and pass ``palette=palette`` to every figure
that draws runs; it colours them and orders them by the leaderboard (without it a figure falls back on
its own input's order). The report does exactly this, so a notebook doing it gets the report's colours.

Every plotting function ``<name>(...)`` has a tidy twin ``<name>_data(...)`` taking the same
arguments and returning the polars frame it draws (rows in plotting order, run labels included),
so a report can write ``tables/<name>.csv`` next to ``figures/<name>.png``; the figure takes that frame
as ``twin=`` (computed once: ``fig = leaderboard(cmp, twin=leaderboard_data(cmp))``). ``FIGURES`` maps
each name to its (figure, data) pair.

Inputs: ``Comparison`` (``toolkit.compare``), ``per_case`` frames, ``ItemAnalysis``
(``analyse_items``), the ``harms`` frame, ``Agreement`` (``judge_agreement``) and ``RunData``
(``read_runs``; answer lengths in characters need ``texts=True``, else completion tokens are used) and
``VarianceBudget`` (``toolkit.analysis.variance``: worst-at-k curves).

Errors: a figure that cannot be drawn raises ``ValueError`` with a one-line reason instead of drawing
an empty panel: fewer than two runs (``pairwise_forest``, ``win_delta_matrix``; ``pair_scatter`` on
the same or an unknown run, or runs without a common case), an unknown baseline, no run with two or
more judge passes or judges (``judge_agreement``), no answer length (``length_bias``), no token
usage (``cost``: imported and simulated runs carry none), no item to show (``item_rates``). Null
intervals and NaN scores are drawn as points without bars or left out (and counted in a title).

Look: one style for all (``style.RC`` applied inside each call, never at import): the Okabe-Ito
colour-blind-safe palette, cividis and PuOr colour maps, fonts of 9 pt or more at 8 in wide and
100 dpi, heights that grow with the number of runs or pairs (the forest shows the 40 largest |delta|
of more pairs and says so), run ids shortened to unique labels of at most 28 characters.
Figures are made with ``matplotlib.figure.Figure`` directly (no pyplot, no display, nothing kept
alive), rendered deterministically: the same inputs give the same PNG bytes and SVG text.

Only the report and notebooks import this package; matplotlib is never loaded by other commands.
"""

from __future__ import annotations

from toolkit.figures.board import benchmark_heatmap, benchmark_heatmap_data, leaderboard, leaderboard_data
from toolkit.figures.cases import (cost, cost_data, length_bias, length_bias_data, score_distributions,
                                   score_distributions_data)
from toolkit.figures.harms import harm_rates, harm_rates_data, precision_recall, precision_recall_data
from toolkit.figures.items import item_rates, item_rates_data
from toolkit.figures.judges import judge_agreement, judge_agreement_data
from toolkit.figures.pairs import (pair_scatter, pair_scatter_data, pairwise_forest, pairwise_forest_data,
                                   win_delta_matrix, win_delta_matrix_data)
from toolkit.figures.palette import palette_for
from toolkit.figures.reliability import worst_at_k, worst_at_k_data
from toolkit.figures.render import png_bytes, save_png, svg_text
from toolkit.figures.style import short_labels

FIGURES = {
    "leaderboard": (leaderboard, leaderboard_data),
    "benchmark_heatmap": (benchmark_heatmap, benchmark_heatmap_data),
    "pairwise_forest": (pairwise_forest, pairwise_forest_data),
    "win_delta_matrix": (win_delta_matrix, win_delta_matrix_data),
    "score_distributions": (score_distributions, score_distributions_data),
    "pair_scatter": (pair_scatter, pair_scatter_data),
    "item_rates": (item_rates, item_rates_data),
    "harm_rates": (harm_rates, harm_rates_data),
    "precision_recall": (precision_recall, precision_recall_data),
    "judge_agreement": (judge_agreement, judge_agreement_data),
    "length_bias": (length_bias, length_bias_data),
    "cost": (cost, cost_data),
    "worst_at_k": (worst_at_k, worst_at_k_data),
}

__all__ = sorted({name for pair in FIGURES.values() for name in (p.__name__ for p in pair)}
                 | {"FIGURES", "palette_for", "png_bytes", "save_png", "svg_text", "short_labels"})
