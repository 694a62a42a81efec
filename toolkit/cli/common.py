"""What every command shares: options, output formats, and one-line errors."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import click
import polars as pl

from toolkit.dataset import DatasetError
from toolkit.store import Store, StoreError

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


def run_safely(group: click.Group, argv: list[str]) -> int:
    """Run the CLI; known failures become one line each on stderr and a non-zero exit."""
    try:
        # Outside standalone mode click returns ctx.exit(n)'s code instead of raising it.
        code = group.main(args=argv, prog_name="bedside", standalone_mode=False)
        if isinstance(code, int):
            return code
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.exceptions.Abort:
        click.echo("bedside: interrupted", err=True)
        return 130
    except MemoryError:
        # numpy's message (shape and dtype of one allocation) says nothing a user can act on.
        click.echo("bedside: error: out of memory: use fewer --samples or fewer runs", err=True)
        return EXIT_FAILED
    except click.ClickException as error:
        error.show()
        return error.exit_code if error.exit_code not in (None, 0) else EXIT_FAILED
    except (DatasetError, StoreError, ValueError, OSError) as error:
        lines = [str(p) for p in getattr(error, "problems", [])] or [str(error)]
        for line in lines:
            click.echo(f"bedside: error: {line}", err=True)
        return EXIT_FAILED
    return 0


def store_option(func: Callable) -> Callable:
    return click.option("--store", "store_dir", type=click.Path(file_okay=False),
                        help="Store directory (default: $BEDSIDE_STORE or data/results).")(func)


def dataset_option(func: Callable) -> Callable:
    return click.option("--dataset", "dataset_path", type=click.Path(exists=False),
                        help="Dataset checkout or case file (default: the bundled sample).")(func)


def format_option(func: Callable) -> Callable:
    return click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                        show_default=True, help="Output format.")(func)


def open_store(store_dir: str | None) -> Store:
    return Store.open(store_dir)


def selected_runs(store: Store, runs: tuple[str, ...], all_runs: bool) -> list[str]:
    if all_runs and runs:
        raise click.UsageError("give --run or --all, not both")
    if all_runs:
        ids = store.run_ids()
        if not ids:
            raise StoreError(f"{store.root}: the store has no runs")
        return ids
    if not runs:
        raise click.UsageError("choose runs with --run ID (repeatable) or --all")
    return list(dict.fromkeys(runs))  # a run given twice is one run (first occurrence order)


def emit(frame: pl.DataFrame, fmt: str, title: str | None = None) -> None:
    """Print a frame as a table, CSV or JSON records."""
    if fmt == "csv":
        sys.stdout.write(frame.write_csv())
    elif fmt == "json":
        click.echo(json.dumps(frame.to_dicts(), indent=2, default=str))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for name in frame.columns:
            table.add_column(name, overflow="fold")
        for row in frame.iter_rows():
            table.add_row(*[_cell(v) for v in row])
        Console(width=max(100, min(200, 24 * len(frame.columns)))).print(table)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
