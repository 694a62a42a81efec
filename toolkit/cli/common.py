"""What every command shares: options, output formats, and one-line errors."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import click

# Imported by every command, including ``--version`` and ``--help``: only click at the top; the data
# stack (polars, the store) is imported where it is used.
if TYPE_CHECKING:
    import polars as pl

    from toolkit.store import Store

EXIT_USAGE = 2
EXIT_FAILED = 1


class CommandError(click.ClickException):
    """A failure reported as ``bedside: error: ...`` lines."""

    def __init__(self, lines: list[str]):
        super().__init__(lines[0])
        self.lines = lines

    def show(self, file: Any = None) -> None:
        for line in self.lines:
            click.echo(f"bedside: error: {line}", err=True)


class Interrupted(click.ClickException):
    """Ctrl-C caught inside a command: one line, exit 130 (click's own handling adds a blank line)."""

    exit_code = 130

    def __init__(self) -> None:
        super().__init__("interrupted")

    def show(self, file: Any = None) -> None:
        click.echo("bedside: interrupted", err=True)


def run_safely(group: click.Group, argv: list[str]) -> int:
    """Run the CLI; failures become one line each on stderr and a non-zero exit, never a traceback.

    An exception no check anticipated is still one line (``internal error: <type>: <message>``);
    ``BEDSIDE_DEBUG=1`` lets it through with its traceback."""
    try:
        # Outside standalone mode click returns ctx.exit(n)'s code instead of raising it.
        code = group.main(args=argv, prog_name="bedside", standalone_mode=False)
        if isinstance(code, int):
            return code
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("bedside: interrupted", err=True)
        return 130
    except MemoryError:
        # numpy's message (shape and dtype of one allocation) says nothing a user can act on.
        hint = ("the file does not fit in this machine's memory" if argv[:1] in (["import"], ["dataset"])
                else "use fewer --samples or fewer runs")
        click.echo(f"bedside: error: out of memory: {hint}", err=True)
        return EXIT_FAILED
    except click.ClickException as error:
        error.show()
        return error.exit_code if error.exit_code not in (None, 0) else EXIT_FAILED
    except UnicodeEncodeError as error:  # mostly a path whose bytes are not UTF-8 (DuckDB, Arrow, Delta need UTF-8)
        from toolkit.inputs import shorten

        text = str(error.object)
        what = "path" if os.sep in text and len(text) < 4096 else "text"
        shown = shorten(text.encode("utf-8", "backslashreplace").decode("utf-8"))
        click.echo(f"bedside: error: {shown}: {what}: not UTF-8 ({error.reason})", err=True)
        return EXIT_FAILED
    except _input_errors() as error:
        lines = [str(p) for p in getattr(error, "problems", [])] or [(str(error).splitlines() or [""])[0]]
        for line in lines:
            click.echo(f"bedside: error: {line}", err=True)
        unlisted = getattr(error, "total", 0) - len(lines)
        if unlisted > 0:  # a file of a million bad lines lists its first problems and counts the rest
            click.echo(f"bedside: error: ... and {unlisted} more problem(s) not listed", err=True)
        return EXIT_FAILED
    except RecursionError:
        click.echo("bedside: error: input nested too deeply", err=True)
        return EXIT_FAILED
    except Exception as error:
        if os.environ.get("BEDSIDE_DEBUG"):
            raise
        first = (str(error).splitlines() or [""])[0]
        click.echo(f"bedside: error: internal error: {type(error).__name__}: {first} "
                   "(BEDSIDE_DEBUG=1 shows the traceback)", err=True)
        return EXIT_FAILED
    return 0


def _input_errors() -> tuple[type[Exception], ...]:
    """Errors that mean bad input (DatasetError is a ValueError). StoreError counts once the store is
    loaded: an error of a module never imported cannot have been raised."""
    store_error = getattr(sys.modules.get("toolkit.store"), "StoreError", None)
    return (ValueError, OSError) + ((store_error,) if store_error is not None else ())


STORE_DEFAULT_TEXT = "$BEDSIDE_STORE, else ./data/results under the current directory"


class _StoreOption(click.Option):
    """``--store``, whose help also shows where the default store is right now."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        from toolkit.store import default_store_path

        return record[0], f"{record[1]} [now: {default_store_path()}]"


def store_option(func: Callable) -> Callable:
    return click.option("--store", "store_dir", type=click.Path(file_okay=False), cls=_StoreOption,
                        help=f"Store directory (default: {STORE_DEFAULT_TEXT}).")(func)


def dataset_option(func: Callable) -> Callable:
    return click.option("--dataset", "dataset_path", type=click.Path(exists=False),
                        help="Dataset checkout or case file (default: $BEDSIDE_DATASET, else the bundled sample).")(func)


def _set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[WIDE_KEY] = True
    return value


WIDE_KEY = "bedside.wide"


def wide_option(func: Callable) -> Callable:
    """``--wide``: tables show every column, however wide (read by ``emit``; no parameter to pass on)."""
    return click.option("--wide", is_flag=True, expose_value=False, callback=_set_wide,
                        help="Tables: every column, wider than the terminal if need be (default: the columns "
                             "that fit).")(func)


def format_option(func: Callable) -> Callable:
    func = wide_option(func)
    return click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                        show_default=True, help="Output format.")(func)


def open_store(store_dir: str | None) -> Store:
    from toolkit.store import Store

    return Store.open(store_dir)


def selected_runs(store: Store, runs: tuple[str, ...], all_runs: bool) -> list[str]:
    if all_runs and runs:
        raise click.UsageError("give --run or --all, not both")
    store.prefetch()  # the runs' tables are read next: their logs are loaded at once
    if all_runs:
        ids = store.run_ids()
        if not ids:
            from toolkit.store import StoreError

            raise StoreError(no_runs_message(store))
        damaged = store.damaged(ids)  # a truncated file costs its run, not the whole store: one line each
        for run_id, problem in damaged.items():
            click.echo(f"bedside: warning: run {run_id!r} left out: {problem}", err=True)
        return [i for i in ids if i not in damaged] or ids
    if not runs:
        raise click.UsageError("choose runs with --run ID (repeatable) or --all")
    # A run given twice is one run (first occurrence order); an NFD spelling names the NFC run.
    return list(dict.fromkeys(store.stored_id(r) for r in runs))


def no_runs_message(store: Store) -> str:
    """The one line for an empty store, saying which store was read and how to choose another."""
    return (f"{store.root}: the store has no runs (the default store is {STORE_DEFAULT_TEXT}; give --store DIR, "
            "or fill this one with `bedside demo`, `bedside run` or `bedside import`)")


def emit(frame: pl.DataFrame, fmt: str, title: str | None = None, optional: Sequence[str] = ()) -> None:
    """Print a frame as a table, CSV or JSON records.

    A table fits the terminal (``COLUMNS`` or its real width; 80 when output is not a terminal): when
    all columns do not fit, the ``optional`` ones are left out first, then columns from the right (never
    the first), and a caption names them; ``--wide`` prints every column. CSV and JSON are never cut.
    """
    if fmt == "csv":
        from toolkit.spreadsheet import write_csv  # formula-like text cells neutralised

        sys.stdout.write(write_csv(frame))
    elif fmt == "json":
        from toolkit.inputs import dumps

        click.echo(dumps(frame.to_dicts(), indent=2, default=str))  # valid JSON: NaN and Infinity as null
    else:
        print_table(frame, title, optional, wide=_wide_requested())


def echo_wrapped(text: str) -> None:
    """A line of prose, wrapped at word boundaries to the terminal width (indented after the first line)."""
    import textwrap

    click.echo(textwrap.fill(text, width=terminal_width(), subsequent_indent="  ", break_long_words=False,
                             break_on_hyphens=False))


def terminal_width() -> int:
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _wide_requested() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get(WIDE_KEY))


FOLD_WIDTH = 24  # a long text cell may wrap down to this width; numbers and short cells never wrap
# Left out first when a table is too wide for the terminal (after the caller's ``optional``): identifiers
# and detail behind the headline numbers. The remaining columns then go from the right.
SECONDARY_COLUMNS = (
    "dataset_sha256", "item_id", "case_id", "source", "resamples", "answer_model", "judge_model", "grading_method",
    "n_benchmarks", "benchmarks_missing", "passes", "rank_median", "df", "se", "mdd80", "wins", "ties", "losses",
    "mean_a", "mean_b", "severity_class", "wilcoxon_p", "p_bh", "not_attempted", "n_runs",
)
# Left out last, the end of this list first: what a row is about and the numbers a table is printed for.
ESSENTIAL_COLUMNS = (
    "run_id", "run", "run_a", "run_b", "rater_a", "rater_b", "scope", "benchmark", "text", "overall", "mean",
    "delta", "value", "rank", "ci_low", "ci_high", "ci95_low", "ci95_high", "p_holm", "miss_rate", "match_rate",
    "f1", "precision", "recall", "percent_agreement", "cohen_kappa", "discrimination", "p_value", "rank_low",
    "rank_high", "cases", "errors",
)
# What a row is about (among the essential columns): left out first all the same when every row has one value.
KEY_COLUMNS = frozenset({"run_id", "run", "run_a", "run_b", "rater_a", "rater_b", "scope", "benchmark"})


def print_table(frame: pl.DataFrame, title: str | None, optional: Sequence[str] = (), wide: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    cells = [[_cell(v) for v in row] for row in frame.iter_rows()]
    columns = list(frame.columns)
    # Headers are shown with spaces for underscores, so that they wrap between words, never inside one.
    header = {c: c.replace("_", " ") for c in columns}
    natural = {c: max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)}
    need = {c: max(max(map(len, header[c].split() or [""])), min(natural[c], FOLD_WIDTH)) for c in columns}
    width = terminal_width()
    shown = list(columns)
    # A column with one value in every row tells no row from another (the run of a one-run table): unless
    # it is one of the numbers a table is printed for, it goes first, and the caption gives its value.
    same = {c: cells[0][i] for i, c in enumerate(columns)
            if len(cells) > 1 and (c not in ESSENTIAL_COLUMNS or c in KEY_COLUMNS)
            and all(row[i] == cells[0][i] for row in cells)}
    if not wide:
        first = [c for c in (*same, *optional, *SECONDARY_COLUMNS) if c in columns]
        rest = [c for c in reversed(columns[1:]) if c not in ESSENTIAL_COLUMNS]
        last = [c for c in reversed(ESSENTIAL_COLUMNS) if c in columns[1:]]
        droppable = list(dict.fromkeys(first + rest + last))
        while _table_width(need[c] for c in shown) > width and droppable and len(shown) > 1:
            shown.remove(droppable.pop(0))
    hidden = [c for c in columns if c not in shown]
    named = [f"{c} = {same[c]}" if c in same and same[c] else c for c in hidden]
    caption = f"not shown: {', '.join(named)} (--wide shows every column)" if hidden else None
    table = Table(title=title, caption=caption, show_lines=False)
    for c in shown:
        table.add_column(header[c], overflow="fold", min_width=need[c], no_wrap=natural[c] <= need[c])
    index = [columns.index(c) for c in shown]
    for row in cells:
        table.add_row(*[row[i] for i in index])
    full = _table_width(natural[c] for c in shown)
    console = Console(width=max(width, full) if wide else width, soft_wrap=False)
    if cells and full <= console.width and not console.is_terminal and console.color_system is None \
            and all(_plain(cell) for row in cells for cell in row):
        _print_plain(console, title, caption, [header[c] for c in shown], [natural[c] for c in shown],
                     [[row[i] for i in index] for row in cells])
        return
    console.print(table)


def _plain(cell: str) -> bool:
    # What rich prints as it is: printable ASCII (one column a character), no markup ([), no emoji code (:).
    return cell.isascii() and cell.isprintable() and "[" not in cell and ":" not in cell


def _print_plain(console: Any, title: str | None, caption: str | None, headers: list[str], widths: list[int],
                 rows: list[list[str]]) -> None:
    """The text rich prints for a table that fits without wrapping, written row by row: rich lays out
    every cell (~1 ms a row; 2.5 s CPU for compare's 435 pairs on a busy machine). Rich itself still
    draws the frame (title, header, borders, caption) with each column at its natural width, and the
    rows go in above the bottom border, left-aligned with one space of padding, as rich writes them."""
    import io

    from rich.console import Console
    from rich.table import Table

    frame = Table(title=title, caption=caption, show_lines=False)
    for name, w in zip(headers, widths):
        frame.add_column(name, min_width=w, no_wrap=True)
    buffer = io.StringIO()
    Console(file=buffer, width=console.width, soft_wrap=False).print(frame)
    lines = buffer.getvalue().split("\n")
    bottom = max(i for i, line in enumerate(lines) if line.startswith("\u2514"))
    body = ["\u2502 " + " \u2502 ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " \u2502" for row in rows]
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
