"""One colour and one place per run for a whole report: ``palette_for`` fixes both, every figure takes it.

    palette = figures.palette_for(cmp)           # or palette_for(["run-a", "run-b", ...]) in leaderboard order
    figures.leaderboard(cmp, palette=palette)    # the same run, the same colour, in every figure

The palette is a dict in leaderboard order (ranked runs, then runs the comparison did not rank or left
out), so it also orders the runs of figures whose inputs know no leaderboard (harms, agreement, cases).
Up to 8 runs get the Okabe-Ito colours in that order (blue, orange, green, vermillion, sky, purple,
yellow, black). Beyond 8, eight colours cannot tell runs apart: every run then gets a shade of the
cividis rank map, dark (first) to olive (last), and figures that colour by run show a rank colour bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from matplotlib.colors import ListedColormap, to_hex

from toolkit.figures.style import MARKERS, OKABE_ITO, SEQUENTIAL

Palette = Mapping[str, str]


def rank_cmap() -> ListedColormap:
    """cividis from dark (best) to olive: its palest yellow end would vanish on white."""
    from matplotlib import colormaps

    return ListedColormap(colormaps[SEQUENTIAL](np.linspace(0.0, 0.82, 256)))


def leaderboard_runs(runs: object) -> list[str]:
    """Run ids in leaderboard order from a ``Comparison`` (ranked, then not ranked, then left out) or an iterable."""
    board = getattr(runs, "leaderboard", None)
    if board is None:
        return list(dict.fromkeys(runs))  # type: ignore[call-overload]
    ids = board["run_id"].to_list()
    for extra in ("not_ranked", "excluded"):
        frame = getattr(runs, extra, None)
        if frame is not None and "run_id" in getattr(frame, "columns", ()):
            ids += frame["run_id"].to_list()
    return list(dict.fromkeys(ids))


def palette_for(runs: object) -> dict[str, str]:
    """Run id -> colour ("#rrggbb") for every run of ``runs`` (a ``Comparison`` or run ids in leaderboard order).

    Okabe-Ito in leaderboard order for up to 8 runs; more runs: each a shade of the cividis rank map by
    its place (the module docstring says why). The dict's order is the order figures draw runs in.
    """
    ids = leaderboard_runs(runs)
    if len(ids) <= len(OKABE_ITO):
        return {r: OKABE_ITO[i] for i, r in enumerate(ids)}
    cmap = rank_cmap()
    return {r: to_hex(cmap(i / (len(ids) - 1))) for i, r in enumerate(ids)}


def is_ranked_shading(palette: Palette) -> bool:
    """True when the palette shades runs by rank (more runs than Okabe-Ito colours): figures add a rank bar."""
    return len(palette) > len(OKABE_ITO)


def in_palette_order(palette: Palette, runs: Iterable[str]) -> list[str]:
    """``runs`` (unique) in the palette's order; runs it does not know follow in their given order."""
    runs = list(dict.fromkeys(runs))
    present = set(runs)
    return [r for r in palette if r in present] + [r for r in runs if r not in palette]


def completed(palette: Palette | None, runs: Iterable[str]) -> dict[str, str]:
    """``palette`` extended to every run of ``runs`` it lacks (those get the next colours), ordered as drawn.

    None: the palette of ``runs`` in their given order.
    """
    runs = list(dict.fromkeys(runs))
    if palette is None:
        return palette_for(runs)
    ordered = in_palette_order(palette, runs)
    known = {r: palette[r] for r in ordered if r in palette}
    missing = [r for r in ordered if r not in palette]
    extra = palette_for(list(palette) + missing)
    return known | {r: extra[r] for r in missing}


def run_marker(palette: Palette, run_id: str) -> str:
    """Markers change only where colours repeat (never with the palette above), so a run keeps its marker too."""
    index = list(palette).index(run_id) if run_id in palette else 0
    return MARKERS[(index // len(OKABE_ITO)) % len(MARKERS)]
