"""Figures to PNG bytes or SVG text, byte-for-byte the same for the same figure.

PNG: no "Software" (matplotlib version) chunk; SVG: no date, a fixed hash salt for clip-path ids
(``style.RC``), text drawn as paths. ``Figure.savefig`` picks the Agg or SVG canvas itself: no pyplot,
no display. Inlined SVGs may repeat glyph and clip ids, always with identical content.
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure

from toolkit.figures.style import styled


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    buffer = io.BytesIO()
    with styled():
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def svg_text(fig: Figure) -> str:
    """The figure as one ``<svg>`` element (no XML declaration or DOCTYPE), ready to inline in HTML."""
    buffer = io.StringIO()
    with styled():
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def save_png(fig: Figure, path: str | Path, dpi: int = 100) -> Path:
    """Write ``png_bytes(fig)`` to ``path`` (parent directories made) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(fig, dpi))
    return path
