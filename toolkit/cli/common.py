"""What every command shares: one-line errors, the store and its runs, and output as tables, CSV or JSON
(the options they share are in ``toolkit.cli.options``)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import click

from toolkit.cli.table import WIDE_KEY, print_table, terminal_width  # noqa: F401 (the commands' table renderer)
from toolkit.text import visible, visible_json

# Imported by every command, including ``--version`` and ``--help``: only click at the top; the data
# stack (polars, the store) is imported where it is used.
if TYPE_CHECKING:
    import polars as pl

    from toolkit.store import Store

EXIT_USAGE = 2
EXIT_FAILED = 1


def say(text: str, err: bool = False) -> None:
    """Lines of a message on stdout (or stderr), their terminal controls shown as escapes: run ids,
    models, file names and provider messages come from files and replies."""
    click.echo("\n".join(visible(line) for line in text.split("\n")), err=err)


def error_line(text: str) -> None:
    """``bedside: error: ...`` on stderr, one line whatever the text holds (a newline shows as ``\x0a``)."""
    click.echo(visible(f"bedside: error: {text}"), err=True)


def warning_line(text: str) -> None:
    click.echo(visible(f"bedside: warning: {text}"), err=True)


def note_line(text: str) -> None:
    """A note after the tables: one line on stderr, so that stdout holds the tables alone."""
    click.echo(visible(f"note: {text}"), err=True)


def echo_json(text: str) -> None:
    """JSON text for stdout: still the same JSON, with no raw terminal control in its strings."""
    click.echo(visible_json(text))


class _VisibleStream:
    """A stream for click's own messages (usage errors echo the user's arguments): controls shown as escapes."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write("\n".join(visible(line) for line in text.split("\n")))

    def flush(self) -> None:
        self.stream.flush()


class CommandError(click.ClickException):
    """A failure reported as ``bedside: error: ...`` lines."""

    def __init__(self, lines: list[str]):
        super().__init__(lines[0])
        self.lines = lines

    def show(self, file: Any = None) -> None:
        for line in self.lines:
            error_line(line)


class Interrupted(click.ClickException):
    """Ctrl-C caught inside a command: one line, exit 130 (click's own handling adds a blank line)."""

    exit_code = 130

    def __init__(self) -> None:
        super().__init__("interrupted")

    def show(self, file: Any = None) -> None:
        say("bedside: interrupted", err=True)


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
        error_line(f"out of memory: {hint}")
        return EXIT_FAILED
    except click.UsageError as error:  # one line, as every refusal: the message and where the help is
        where = error.ctx.command_path if error.ctx is not None else "bedside"
        error_line(f"{error.format_message()} (see `{where} --help`)")
        return error.exit_code
    except click.ClickException as error:
        error.show(_VisibleStream(sys.stderr))
        return error.exit_code if error.exit_code not in (None, 0) else EXIT_FAILED
    except UnicodeEncodeError as error:  # mostly a path whose bytes are not UTF-8 (DuckDB, Arrow, Delta need UTF-8)
        from toolkit.inputs import shorten

        text = str(error.object)
        what = "path" if os.sep in text and len(text) < 4096 else "text"
        shown = shorten(text.encode("utf-8", "backslashreplace").decode("utf-8"))
        error_line(f"{shown}: {what}: not UTF-8 ({error.reason})")
        return EXIT_FAILED
    except _input_errors() as error:
        lines = [str(p) for p in getattr(error, "problems", [])] or [(str(error).splitlines() or [""])[0]]
        for line in lines:
            error_line(line)
        unlisted = getattr(error, "total", 0) - len(lines)
        if unlisted > 0:  # a file of a million bad lines lists its first problems and counts the rest
            error_line(f"... and {unlisted} more problem(s) not listed")
        return EXIT_FAILED
    except RecursionError:
        error_line("input nested too deeply")
        return EXIT_FAILED
    except Exception as error:
        if os.environ.get("BEDSIDE_DEBUG"):
            raise
        first = (str(error).splitlines() or [""])[0]
        error_line(f"internal error: {type(error).__name__}: {first} (BEDSIDE_DEBUG=1 shows the traceback)")
        return EXIT_FAILED
    return 0


def _input_errors() -> tuple[type[Exception], ...]:
    """Errors that mean bad input (DatasetError is a ValueError). StoreError counts once the store is
    loaded: an error of a module never imported cannot have been raised."""
    store_error = getattr(sys.modules.get("toolkit.store"), "StoreError", None)
    return (ValueError, OSError) + ((store_error,) if store_error is not None else ())


STORE_DEFAULT_TEXT = "$BEDSIDE_STORE, else ./data/results under the current directory"


@dataclass(frozen=True, kw_only=True)
class RunChoice:
    """``--run ID`` (repeatable; a pattern such as ``'model-*'`` too), ``--runs-file FILE`` or ``--all``, as
    given: ``selected_runs`` turns it into run ids."""

    ids: tuple[str, ...] = ()
    every: bool = False
    file: str | None = None


def open_store(store_dir: str | None) -> Store:
    from toolkit.store import Store

    return Store.open(store_dir)


def selected_runs(store: Store, runs: RunChoice, tables: tuple[str, ...] | None = None) -> list[str]:
    """The run ids chosen; ``tables``: the run tables the command reads next (default: all), whose logs are
    loaded now and whose files ``--all`` checks, leaving out a damaged run."""
    given = runs.ids + (_runs_file(runs.file) if runs.file is not None else ())
    if runs.every and given:
        raise click.UsageError("give --run or --all, not both")
    if tables is None:
        store.prefetch()  # the runs' tables are read next: their logs are loaded at once
    else:
        store.prefetch(("runs", *tables))
    if runs.every:
        ids = store.run_ids()
        if not ids:
            from toolkit.store import StoreError

            raise StoreError(no_runs_message(store))
        damaged = store.damaged(ids, tables)  # a truncated file costs its run, not the whole store: one line each
        for run_id, problem in damaged.items():
            warning_line(f"run {run_id!r} left out: {problem}")
        return [i for i in ids if i not in damaged] or ids
    if not given:
        if runs.file is not None:
            raise click.UsageError(f"{runs.file}: --runs-file names no run")
        raise click.UsageError("choose runs with --run ID (repeatable, or a pattern such as 'model-*'), "
                               "--runs-file FILE or --all")
    from toolkit.selection import chosen_run_ids

    return chosen_run_ids(store, list(given))


def _runs_file(path: str) -> tuple[str, ...]:
    """The run ids (or patterns) of a ``--runs-file``: one a line, blank lines and ``#`` comments skipped."""
    from toolkit.inputs import shorten

    try:
        with open(path, encoding="utf-8") as source:
            lines = source.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise CommandError([f"{shorten(path)}: cannot read the runs file ({reason})"]) from None
    return tuple(line.strip() for line in lines if line.strip() and not line.strip().startswith("#"))


def no_runs_message(store: Store) -> str:
    """The one line for an empty store, saying which store was read and how to choose another."""
    return (f"{store.root}: the store has no runs (the default store is {STORE_DEFAULT_TEXT}; give --store DIR, "
            "or fill this one with `bedside demo`, `bedside run` or `bedside import`)")


def emit(frame: pl.DataFrame, fmt: str, title: str | None = None, optional: Sequence[str] = (),
         derived: Mapping[str, str] | None = None) -> None:
    """Print a frame as a table, CSV or JSON records.

    A table fits the terminal (see ``toolkit.cli.table``): the columns that matter stay, a caption names
    the others, ``--wide`` prints every column, and every cell shows its terminal controls as escapes.
    CSV and JSON are never cut.
    """
    if fmt == "csv":
        from toolkit.text import write_csv  # formula-like text cells neutralised

        sys.stdout.write(write_csv(frame))
    elif fmt == "json":
        from toolkit.inputs import dumps

        echo_json(dumps(frame.to_dicts(), indent=2, default=str))  # valid JSON: NaN and Infinity as null
    else:
        print_table(frame, title, optional, wide=_wide_requested(), derived=derived)


def _wide_requested() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get(WIDE_KEY))
