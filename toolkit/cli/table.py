"""Terminal tables: every cell shown safely (``visible``), the columns that matter fitted to the width.

A table fits the terminal (``COLUMNS`` or its real width; 80 when output is not a terminal). Headers
wrap between words and long texts wrap down to ``FOLD_WIDTH`` before any column is left out; then
columns go in this order: a copy of another column, an empty one, one the caller names as derived,
the caller's ``optional``, one with a single value in every row, ``SECONDARY_COLUMNS``, the rest from
the right, ``ESSENTIAL_COLUMNS`` from its end; the first column only when it is detail (item_id).
The caption names what is not shown. ``wide`` shows every column at full width.
"""

from __future__ import annotations

import re
import shutil
from typing import Any, Iterable, Mapping, Sequence

from toolkit.text import visible

WIDE_KEY = "bedside.wide"  # set by --wide in the command's context
FOLD_WIDTH = 24  # a long text cell may wrap down to this width; numbers and short cells never wrap
# Left out first when a table is too wide for the terminal (after the caller's ``optional``): identifiers
# and detail behind the headline numbers. The remaining columns then go from the right.
SECONDARY_COLUMNS = (
    "dataset_sha256", "item_id", "case_id", "source", "resamples", "answer_model", "judge_model", "grading_method",
    "benchmarks_missing", "passes", "rank_median", "df", "se", "mdd80", "wins / ties / losses", "wins", "ties",
    "losses",
    "mean_a", "mean_b", "severity_class", "wilcoxon_p", "p_bh", "n_runs",
)
# Left out last, the end of this list first: what a row is about and the numbers a table is printed for
# (the raw p before the adjusted one: a row's verdict is its family's).
ESSENTIAL_COLUMNS = (
    "run_id", "run", "run_a", "run_b", "rater_a", "rater_b", "scope", "benchmark", "reason", "text", "overall",
    "overall [95% ci]", "mean", "mean [95% ci]", "corrected [95% ci]", "delta", "delta [95% ci]", "value", "value [95% ci]", "rank", "ci_low", "ci_high", "ci95_low", "ci95_high", "p_holm", "p_value", "miss_rate",
    "match_rate", "f1", "severe_omission_case_rate", "severe_commission_case_rate", "precision", "recall",
    "percent_agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "discrimination", "rank_low",
    "rank_high", "n_benchmarks", "completed / failed / not attempted", "completed", "failed", "not_attempted",
    "cases", "errors",
)
COVERAGE = "completed / failed / not attempted"  # the three case counts of a run in one column
# What a row is about (among the essential columns): left out first all the same when every row has one value.
KEY_COLUMNS = frozenset({"run_id", "run", "run_a", "run_b", "rater_a", "rater_b", "scope", "benchmark"})
# Names of things: one equal to an earlier one in every row (answer_model = run_id) is a copy.
IDENTIFIERS = frozenset({"run_id", "run", "answer_model", "judge_model", "rater_a", "rater_b", "source"})
# "value [low, high]": when its column is narrower, the interval goes on a line of its own under the value.
_INTERVAL = re.compile(r"(\S+) (\[[^\]]*\])")
_BOUNDS = re.compile(r"\[\S+, \S+\]")


def cell_width(text: str) -> int:
    """Terminal columns of a cell's text: one per character for printable ASCII (most cells), else rich's
    measure (wide and zero-width characters)."""
    if text.isascii() and text.isprintable():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def terminal_width() -> int:
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def table_fits(frame: Any) -> bool:
    """Whether every column of ``frame`` fits the terminal, each at its narrowest (headers wrapped, intervals
    under their values), or ``--wide`` asked for every column."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(WIDE_KEY):
        return True
    rows = [[_shown(v) for v in row] for row in frame.iter_rows()]
    columns = list(zip(*rows)) if rows else [()] * frame.width
    widths = [max(max(map(cell_width, c.replace("_", " ").split() or [""])), _measure(cells)[1])
              for c, cells in zip(frame.columns, columns)]
    return _table_width(widths) <= terminal_width()


def print_table(frame: Any, title: str | None, optional: Sequence[str] = (), wide: bool = False,
                derived: Mapping[str, str] | None = None) -> None:
    """Print a polars frame as a rich table; ``derived`` names columns computed from others
    (``{"miss_rate": "1 - match_rate"}``), left out early and named with their formula."""
    from rich.console import Console
    from rich.text import Text

    cells = [[_shown(v) for v in row] for row in frame.iter_rows()]
    columns = list(frame.columns)
    header = {c: visible(c.replace("_", " ")) for c in columns}  # spaces: headers wrap between words
    at = {c: i for i, c in enumerate(columns)}
    measured = dict(zip(columns, map(_measure, zip(*cells) if cells else [()] * len(columns))))
    content = {c: measured[c][0] for c in columns}
    natural = {c: max(cell_width(header[c]), content[c]) for c in columns}
    need = {c: max(max(map(cell_width, header[c].split() or [""])), measured[c][1]) for c in columns}
    width = terminal_width()
    notes = _droppable_notes(columns, cells, derived or {})
    shown = list(columns)
    if not wide:
        said = [c for c in notes if notes[c].startswith(" (")]  # copies, empty and derived columns
        first = [c for c in (*said, *optional, *notes, *SECONDARY_COLUMNS) if c in columns]
        rest = [c for c in reversed(columns[1:]) if c not in ESSENTIAL_COLUMNS]
        last = [c for c in reversed(ESSENTIAL_COLUMNS) if c in columns[1:]]
        droppable = list(dict.fromkeys(first + rest + last))  # the first column only as detail (item_id)
        while _table_width(need[c] for c in shown) > width and droppable and len(shown) > 1:
            shown.remove(droppable.pop(0))
        # Detail goes before an estimate's cell is cut in two (its interval under it).
        whole = {c: max(need[c], measured[c][2]) for c in columns}
        detail = [c for c in droppable if c in first]
        while _table_width(whole[c] for c in shown) > width and detail:
            shown.remove(detail.pop(0))
    hidden = [c for c in columns if c not in shown]
    caption = (f"not shown: {', '.join(c + notes.get(c, '') for c in hidden)} (--wide shows every column)"
               if hidden else None)
    widths = _fitted({c: need[c] for c in shown}, {c: max(need[c], content[c]) for c in shown},
                     {c: natural[c] for c in shown}, None if wide else width)
    full = _table_width(natural[c] for c in shown)
    console = Console(width=max(width, full) if wide else width, soft_wrap=False)
    rows = [[_interval_split(row[at[c]], widths[c]).split("\n") for c in shown] for row in cells]
    table = _frame(title, caption, [header[c] for c in shown], [widths[c] for c in shown])
    if cells and not console.is_terminal and console.color_system is None \
            and all(_fits(line, widths[c]) for row in rows for lines, c in zip(row, shown) for line in lines):
        _print_rows(console, table, [widths[c] for c in shown], rows)
        return
    for row in rows:
        table.add_row(*(Text("\n".join(lines)) for lines in row))
    console.print(table)


def _frame(title: str | None, caption: str | None, headers: list[str], widths: list[int]) -> Any:
    """The rich table without its rows: title, header (wrapping between words), borders and caption."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=_annotation(title, "table.title"), caption=_annotation(caption, "table.caption"))
    for name, w in zip(headers, widths):
        table.add_column(Text(name), overflow="fold", width=w)
    return table


def _droppable_notes(columns: list[str], cells: list[list[str]], derived: Mapping[str, str]) -> dict[str, str]:
    """The columns that say least, in the order they are left out, each with what the caption adds:
    a copy of an earlier column (an identifier such as answer_model = run_id), an empty one, a derived one, one with a single value in every row
    (unless it is one of the numbers a table is printed for)."""
    notes: dict[str, str] = {}
    if not cells:
        return {c: f" (= {f})" for c, f in derived.items() if c in columns}
    values = {c: [row[i] for row in cells] for i, c in enumerate(columns)}
    for i, c in enumerate(columns):
        copy = next((o for o in columns[:i] if o in IDENTIFIERS and values[o] == values[c]), None)
        if copy is not None and any(values[c]) and c in IDENTIFIERS and c not in KEY_COLUMNS:
            notes[c] = f" (= {copy})"
    notes.update({c: " (empty)" for c in columns if not any(values[c]) and c not in notes})
    notes.update({c: f" (= {f})" for c, f in derived.items() if c in columns and c not in notes})
    if len(cells) > 1:
        notes.update({c: f" = {values[c][0]}" if values[c][0] else "" for c in columns
                      if c not in notes and (c not in ESSENTIAL_COLUMNS or c in KEY_COLUMNS)
                      and all(v == values[c][0] for v in values[c])})
    return notes


def _shown(value: Any) -> str:
    """A cell's text with its terminal controls as escapes (printable ASCII, most cells, has none)."""
    text = _cell(value)
    return text if text.isascii() and text.isprintable() else visible(text)


def _measure(cells: Iterable[str]) -> tuple[int, int, int]:
    """A column's cells measured once: (widest cell, widest of their narrowest forms (``_narrowest``), widest
    interval cell ("value [low, high]"; 0 without one))."""
    widest = narrowest = interval = 0
    for cell in cells:
        width = cell_width(cell)
        widest = max(widest, width)
        if "[" in cell and _INTERVAL.fullmatch(cell):
            narrowest = max(narrowest, _narrowest(cell))
            interval = max(interval, width)
        else:
            narrowest = max(narrowest, min(width, FOLD_WIDTH))
    return widest, narrowest, interval


def _narrowest(cell: str) -> int:
    """The narrowest a cell may be drawn: an interval under its value, a long text wrapped down to
    FOLD_WIDTH, anything else whole."""
    interval = _INTERVAL.fullmatch(cell) if "[" in cell else None
    if interval:  # a reason in place of the interval wraps, as narrow as an interval
        bounds = interval.group(2)
        narrow = cell_width(bounds) if _BOUNDS.fullmatch(bounds) else min(cell_width(bounds), len("[0.000, 1.000]"))
        return max(cell_width(interval.group(1)), narrow)
    return min(cell_width(cell), FOLD_WIDTH)


def _interval_split(cell: str, width: int) -> str:
    if "[" not in cell or cell_width(cell) <= width:  # most cells fit: no pattern to match
        return cell
    interval = _INTERVAL.fullmatch(cell)
    return f"{interval.group(1)}\n{interval.group(2)}" if interval else cell


def _fitted(need: dict[str, int], whole: dict[str, int], natural: dict[str, int], width: int | None) -> dict[str, int]:
    """Column widths: each at its narrowest, then the room left makes cells whole (the columns that need
    least first), then headers (a header may wrap between words), up to each column's natural width."""
    if width is None:
        return dict(natural)
    widths = dict(need)
    room = width - _table_width(need.values())
    for target in (whole, natural):
        for c in sorted(need, key=lambda c: target[c] - widths[c]):
            grow = max(0, min(target[c] - widths[c], room))
            widths[c] += grow
            room -= grow
    return widths


def _annotation(text: str | None, style: str) -> Any:
    from rich.text import Text

    return None if text is None else Text(visible(text), style=style)


def _fits(line: str, width: int) -> bool:
    # A line rich prints as it is: printable ASCII (text, not markup; one column a character), no
    # whitespace at either end, within its column.
    return line.isascii() and line.isprintable() and line == line.strip() and len(line) <= width


def _print_rows(console: Any, table: Any, widths: list[int], rows: list[list[list[str]]]) -> None:
    """The text rich prints for a table whose cells need no wrapping (each line of a cell fits its column),
    written row by row: rich measures and lays out every cell, which dominates a long table such as
    compare's pairs. Rich itself still draws the frame (title, header, borders, caption); the rows go in
    above the bottom border, each line of a cell left-aligned with one space of padding, a shorter cell
    padded with blank lines, as rich writes them."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=console.width, soft_wrap=False).print(table)
    lines = buffer.getvalue().split("\n")
    bottom = max(i for i, line in enumerate(lines) if line.startswith("\u2514"))
    body = []
    for row in rows:
        for i in range(max(len(cell) for cell in row)):
            body.append("\u2502 " + " \u2502 ".join((cell[i] if i < len(cell) else "").ljust(w)
                                                     for cell, w in zip(row, widths)) + " \u2502")
    console.file.write("\n".join(lines[:bottom] + body + lines[bottom:]))


def _table_width(widths: Iterable[int]) -> int:
    widths = list(widths)
    return sum(widths) + 3 * len(widths) + 1  # rich's box: a border and one space of padding each side


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
