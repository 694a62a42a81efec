"""The one look of every figure: Okabe-Ito colours, report-size fonts, short run labels, sizes that grow with rows.

Nothing here touches matplotlib's global state at import: ``styled()`` applies ``RC`` for the
duration of a figure's construction and rendering (``matplotlib.rc_context``), and figures are
``matplotlib.figure.Figure`` objects made directly, never through pyplot, so no backend or display
is needed and no figure is kept alive anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec

import matplotlib
from matplotlib.figure import Figure

# Okabe & Ito (2008), the colour-blind-safe qualitative palette (black moved last: it is the ink colour).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
BLUE, ORANGE, GREEN, VERMILLION, SKY, PURPLE, YELLOW, BLACK = OKABE_ITO
GREY = "#8C8C8C"
# Inks for what is not a run (safety benchmarks, agreement statistics): greys, since colours mean runs.
GREYS = ("#404040", "#7A7A7A", "#A8A8A8", "#262626")
LIGHT = "#D9D9D9"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
SEQUENTIAL = "cividis"  # perceptually uniform and readable by the colour-blind
DIVERGING = "PuOr"  # colour-blind-safe diverging map (orange below 0, purple above)

WIDTH = 8.0  # inches; the report shows figures ~8 in wide at 100 dpi
ROW = 0.28  # inches per run/pair row in a dot or forest plot
FONT = 10.0  # pt; tick labels are one point smaller, never below 9
LABEL_WIDTH = 28  # characters a run label may take

RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: the same glyphs (and bytes) on every machine
    "font.size": FONT,
    "axes.titlesize": FONT + 1,
    "axes.titleweight": "bold",
    "axes.labelsize": FONT,
    "xtick.labelsize": FONT - 1,
    "ytick.labelsize": FONT - 1,
    "legend.fontsize": FONT - 1,
    "legend.title_fontsize": FONT - 1,
    "legend.frameon": False,
    "figure.titlesize": FONT + 2,
    "figure.titleweight": "bold",
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "axes.prop_cycle": matplotlib.cycler(color=list(OKABE_ITO)),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "grid.color": LIGHT,
    "grid.linewidth": 0.6,
    "image.cmap": SEQUENTIAL,
    "svg.hashsalt": "bedside",  # fixed clip-path ids: the same figure gives the same SVG text
    "svg.fonttype": "path",  # text as paths: renders identically without the font installed
    "path.simplify": True,
}


@contextmanager
def styled() -> Iterator[None]:
    """The house rcParams while a figure is built or rendered (restored afterwards)."""
    with matplotlib.rc_context(RC):
        yield


P = ParamSpec("P")


def laid_out(draw: Callable[P, Figure]) -> Callable[P, Figure]:
    """Run a figure function, then its constrained layout once, and fix the positions.

    Without this every render (PNG, then SVG) would solve the layout again, measuring every tick
    label each time; fixed positions make both renders cheaper and identical in layout.
    """
    @wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Figure:
        fig = draw(*args, **kwargs)
        engine = fig.get_layout_engine()
        if engine is not None:
            with styled():
                engine.execute(fig)
            fig.set_layout_engine("none")
        return fig

    return wrapper


def new_figure(height: float, width: float = WIDTH) -> Figure:
    """A constrained-layout Figure of ``width`` x ``height`` inches (call inside ``styled()``)."""
    return Figure(figsize=(width, max(2.2, height)), layout="constrained")


def rows_height(rows: int, base: float = 1.4, per_row: float = ROW) -> float:
    """Height in inches of a panel with ``rows`` labelled rows (ticks at FONT-1 need ~0.2 in each)."""
    return base + per_row * max(rows, 1)


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def grey(i: int) -> str:
    return GREYS[i % len(GREYS)]


def marker(i: int) -> str:
    """Markers cycle more slowly than colours, so (colour, marker) stays distinct for 8 x 10 series."""
    return MARKERS[(i // len(OKABE_ITO)) % len(MARKERS)]


def _middle_ellipsis(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head]}…{text[-tail:]}"


def short_labels(ids: Iterable[str], width: int = LABEL_WIDTH) -> dict[str, str]:
    """Run id -> label of at most ``width`` characters, unique among ``ids``.

    Ids that all fit are kept. Otherwise a provider prefix every id shares ("openai/") is dropped; a long id keeps the part where
    the ids differ whole (after the text they all share in front and behind, cut at a "-", "_",
    "/", "." or ":") and as much of its shared head and tail as fits around ellipses. Labels that
    still collide get "#k" suffixes.
    """
    ids = list(dict.fromkeys(ids))
    if all(len(i) <= width for i in ids):
        return {i: i for i in ids}
    if len(ids) > 1 and all("/" in i for i in ids):
        first = ids[0].split("/", 1)[0] + "/"
        if all(i.startswith(first) and len(i) > len(first) for i in ids):
            ids_short = {i: i[len(first):] for i in ids}
        else:
            ids_short = {i: i for i in ids}
    else:
        ids_short = {i: i for i in ids}
    texts = list(ids_short.values())
    head = _shared(texts) if len(texts) > 1 else 0
    tail = _shared([t[::-1] for t in texts]) if len(texts) > 1 else 0
    labels = {}
    for i, text in ids_short.items():
        if len(text) <= width:
            labels[i] = text
            continue
        stop = max(head, len(text) - tail)
        core = text[head:stop] or text
        room = width - len(core) - 2
        if room < 4:
            labels[i] = _middle_ellipsis(text, width)
            continue
        front, back = text[:head], text[stop:]
        keep_back = min(len(back), room // 2)
        keep_front = min(len(front), room - keep_back)
        keep_back = min(len(back), room - keep_front)
        labels[i] = ((front[:keep_front] + "…" if keep_front < len(front) else front) + core
                     + ("…" + back[len(back) - keep_back:] if keep_back < len(back) else back))
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    counts: dict[str, int] = {}
    for i in ids:
        label = labels[i]
        if seen[label] > 1:
            counts[label] = counts.get(label, 0) + 1
            suffix = f"#{counts[label]}"
            labels[i] = _middle_ellipsis(label, width - len(suffix)) + suffix
    return labels


def _shared(texts: list[str]) -> int:
    """Length of the prefix all ``texts`` share, cut back to just after a separator."""
    n = 0
    shortest = min(len(t) for t in texts)
    while n < shortest and all(t[n] == texts[0][n] for t in texts):
        n += 1
    while n > 0 and texts[0][n - 1] not in "-_/.: ":
        n -= 1
    return n


def wrap(text: str, width: int = 48, lines: int = 2) -> str:
    """``text`` on at most ``lines`` lines of ``width`` characters (an ellipsis marks a cut)."""
    words, out, line = text.split(), [], ""
    for word in words:
        if len(word) > width:
            word = word[: width - 1] + "…"
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    if len(out) > lines:
        out = out[:lines]
        last = out[-1]
        out[-1] = (last[: width - 1] if len(last) >= width else last) + "…"
    return "\n".join(out)


def pct(value: float | None) -> str:
    return "–" if value is None or value != value else f"{100 * value:.0f}%"


def num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None or value != value else f"{value:.{digits}f}"
