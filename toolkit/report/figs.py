"""The report's figures: ``toolkit.figures`` drawn from the report's analyses, kept as PNG and data frames."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import matplotlib
from matplotlib.figure import Figure

from toolkit import figures
from toolkit.report.analyses import Analyses
from toolkit.report.model import FigureOut

DPI = 110  # sharp enough in the HTML at the page's width, small enough to embed a dozen


@dataclass(frozen=True)
class Spec:
    name: str  # function name in toolkit.figures (its data twin is ``<name>_data``), and the files' stem
    section: str  # anchor of the section the figure belongs to
    caption: str
    args: Callable[[Analyses], tuple[Any, ...] | None]  # None: nothing to draw
    coloured: bool = True  # takes the report's palette (runs coloured and ordered as on the leaderboard)


def _top_pair(a: Analyses) -> tuple[str, str] | None:
    runs = a.cmp.leaderboard["run_id"].to_list()
    if len(runs) < 2:
        return None
    if a.baseline is not None:
        return next(r for r in runs if r != a.baseline), a.baseline
    return runs[0], runs[1]


SPECS = (
    Spec("leaderboard", "leaderboard", "Overall score with 95% interval (left) and 95% rank interval (right).",
         lambda a: (a.cmp,)),
    Spec("benchmark_heatmap", "benchmarks", "Mean per run and benchmark; the interval width is shown in each cell.",
         lambda a: (a.cmp,), False),
    Spec("score_distributions", "benchmarks", "Distribution of case scores per run and benchmark.",
         lambda a: (a.cases.filter(a.cases["run_id"].is_in(a.cmp.leaderboard["run_id"].to_list())),)),
    Spec("pairwise_forest", "pairwise", "Paired differences with 95% intervals; filled marks differ after Holm.",
         lambda a: (a.cmp, a.baseline) if a.cmp.leaderboard.height > 1 else None, False),
    Spec("pair_scatter", "differ", "Case scores of the top pair: points off the diagonal are the cases where "
         "they differ.", lambda a: (a.cases, *pair) if (pair := _top_pair(a)) else None, False),
    Spec("item_rates", "items", "Most-missed high-severity positive items and most-endorsed harmful items.",
         lambda a: (a.items,) if a.items is not None else None, False),
    Spec("harm_rates", "harms", "Severe omission vs severe commission case rates with 95% intervals.",
         lambda a: (a.harm,) if a.harm is not None else None),
    Spec("precision_recall", "harms", "Severity-weighted precision against recall per run.",
         lambda a: (a.harm,) if a.harm is not None else None),
    Spec("judge_agreement", "judges", "Agreement between judge passes or judges per benchmark.",
         lambda a: (a.agreement,) if a.agreement is not None else None),
    Spec("worst_at_k", "reliability", "Worst-at-k per run: the expected lowest score among k answers to a case "
         "(k = 1: the run's mean), macro over benchmarks, with 95% intervals (cases resampled).",
         lambda a: (a.variance,) if a.variance is not None else None),
    Spec("length_bias", "length-cost", "Case score against answer length: a slope here is a length bias check.",
         lambda a: (a.data, a.cases if a.samples is None else a.samples)),  # several answers: each a point
    Spec("cost", "length-cost", "Overall score against cost per case: dollars when every run is priced "
         "(--prices), else tokens; runs that recorded usage.", lambda a: (a.data, a.cases, a.costs)),
)


# Scatter plots that label every run: past this many runs their labels cover each other, so a report of more
# runs leaves them out with a note (the tables hold every run).
LABELLED = ("precision_recall", "cost")
LABELLED_RUNS = 30


def figure_palette(a: Analyses) -> dict[str, str]:
    """The one colour of each run in every figure and table swatch of the report (leaderboard order)."""
    return figures.palette_for(a.cmp)


def draw(a: Analyses, notes: list[str]) -> dict[str, list[FigureOut]]:
    """Section anchor -> its figures, every run in its one colour and place (``palette_for``). A figure that
    does not apply (``ValueError``: one judge pass, no usage) is left out with a note; characters the font
    lacks are named once in the notes instead of reaching stderr as matplotlib warnings."""
    out: dict[str, list[FigureOut]] = {}
    palette = figure_palette(a)
    missing: dict[str, None] = {}
    runs = a.data.runs.height
    for spec in SPECS:
        if spec.name in LABELLED and runs > LABELLED_RUNS:
            notes.append(f"figure {spec.name} not drawn: its labels cannot tell {runs} runs apart (more than "
                         f"{LABELLED_RUNS}); the tables show every run")
            continue
        args = spec.args(a)
        if args is None:
            continue
        kwargs = {"palette": palette} if spec.coloured else {}
        # Run ids and rubric texts are data: a "$" in them must print as itself, not start TeX math.
        fig: Figure | None = None
        with matplotlib.rc_context({"text.parse_math": False}), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                data = getattr(figures, f"{spec.name}_data")(*args, **kwargs)
                fig = getattr(figures, spec.name)(*args, **kwargs, twin=data)  # the frame drawn, computed once
                png = figures.png_bytes(fig, dpi=DPI)
            except ValueError as error:
                fig = None
                notes.append(f"figure {spec.name} not drawn: {error or type(error).__name__}")
        _glyphs(caught, missing)  # outside the catch: other warnings are re-issued to the caller's filters
        if fig is None:
            continue
        fig.clear()
        out.setdefault(spec.section, []).append(FigureOut(spec.name, spec.caption, png, data))
    if missing:
        notes.append(missing_glyph_note(list(missing), a))
    return out


_GLYPH = re.compile(r"Glyph (\d+) .*missing from")


def _glyphs(caught: list[warnings.WarningMessage], missing: dict[str, None]) -> None:
    """Keep the characters of matplotlib's "Glyph N missing from font" warnings; re-issue any other warning."""
    for w in list(caught):
        found = _GLYPH.search(str(w.message))
        if found:
            missing[chr(int(found.group(1)))] = None
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def missing_glyph_note(chars: list[str], a: Analyses) -> str:
    """One line: which characters the figures' font lacks, and the run ids drawn with empty boxes for them."""
    runs = [r for r in a.data.runs["run_id"].to_list() if any(c in r for c in chars)]
    codes = ", ".join(f"U+{ord(c):04X}" for c in chars)
    where = f"run ids {', '.join(repr(r) for r in runs)}" if runs else "some labels (rubric or benchmark text)"
    return (f"figures: the font (DejaVu Sans) has no glyph for {codes}: {where} are drawn with an empty box "
            "in those places; the tables show them in full")
