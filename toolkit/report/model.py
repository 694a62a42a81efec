"""What a report is made of before it is rendered: sections holding tables, figures and paragraphs.

Every value here is plain text; the templates escape it (HTML autoescaping, Markdown escaping), so
nothing built here may contain markup.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class Cell:
    text: str
    href: str | None = None  # an in-page anchor ("#run-x"); never an external address
    kind: str = ""  # css class: num, good, bad, muted, mono
    title: str | None = None  # hover text
    id: str | None = None  # anchor of the row (runs, cases)
    colour: str | None = None  # "#rrggbb" of the run in every figure (``figures.palette_for``): a swatch


@dataclass(frozen=True, eq=False)
class Table:
    key: str  # tables/<key>.csv and the table's anchor
    caption: str
    columns: list[str]
    rows: list[list[Cell]]
    frame: pl.DataFrame  # the data behind the table, written as CSV


@dataclass(frozen=True, eq=False)
class FigureOut:
    key: str  # figures/<key>.png, tables/figure_<key>.csv and the anchor fig-<key>
    caption: str
    png: bytes
    data: pl.DataFrame | None


@dataclass(frozen=True)
class Side:
    """One run's side of a case shown side by side."""

    run_id: str
    anchor: str
    score: str
    answer: str
    items: list[tuple[str, str, str]]  # (mark, points, text); mark: matched / missed / endorsed / avoided


@dataclass(frozen=True)
class CaseView:
    anchor: str
    case_id: str
    benchmark: str
    gap: str
    prompt: str
    sides: tuple[Side, Side]


@dataclass(frozen=True)
class PairView:
    anchor: str
    title: str
    cases: list[CaseView]


@dataclass(eq=False)
class Section:
    anchor: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[FigureOut] = field(default_factory=list)
    pairs: list[PairView] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)  # key: value lines (reproducibility)
    command: str | None = None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def run_anchors(run_ids: list[str]) -> dict[str, str]:
    """Stable, unique anchors ``run-<slug>``; runs whose slugs collide get a digest suffix."""
    slugs = [slug(r) for r in run_ids]
    return {r: f"run-{s}" if slugs.count(s) == 1 else f"run-{s}-{hashlib.sha1(r.encode()).hexdigest()[:6]}"
            for r, s in zip(run_ids, slugs)}


def case_anchor(case_id: str) -> str:
    return f"case-{slug(case_id)}"


def missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value: float | None, digits: int = 3) -> str:
    return "–" if missing(value) else f"{value:.{digits}f}"


def signed(value: float | None, digits: int = 3) -> str:
    return "–" if missing(value) else f"{value:+.{digits}f}"


def interval(value: float | None, low: float | None, high: float | None, digits: int = 3, sign: bool = False) -> str:
    """``value [low, high]``; ``value (no CI)`` when there is a value but no interval (its cell's title says why)."""
    fmt = signed if sign else num
    if missing(low) or missing(high):
        return fmt(value, digits) + ("" if missing(value) else " (no CI)")
    return f"{fmt(value, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def p_text(value: float | None) -> str:
    if missing(value):
        return "–"
    return f"{value:.3f}" if value >= 0.001 else ("<0.001" if value >= 1e-12 else "<1e-12")


def pct(value: float | None) -> str:
    return "–" if missing(value) else f"{100 * value:.0f}%"


def plain(value: object) -> Cell:
    return Cell("–" if missing(value) else str(value))


def number(value: float | None, digits: int = 3) -> Cell:
    return Cell(num(value, digits), kind="num")
