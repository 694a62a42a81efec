"""``bedside import | export | summary | sql``: reference interop and the store's numbers."""

from __future__ import annotations

import sys
from decimal import Decimal

import click
import polars as pl

from toolkit.bootstrap import BootstrapSettings
from toolkit.cli.common import CommandError, Interrupted, emit, error_line, open_store, say, selected_runs
from toolkit.cli.options import (RunChoice, dataset_option, format_option, judge_options, json_option, one_run_option,
                                 resample_options, run_options, store_option, wide_option)
from toolkit.inputs import dumps, finite_or_none
from toolkit.selection import JudgeSelection
from toolkit.summary import SummaryOptions, ci_method, summarize


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--run-id", default=None, help="Run id (default: the file name without .jsonl).")
@click.option("--replace", is_flag=True, help="Replace an existing run with this id.")
@click.option("--as-samples", is_flag=True,
              help="The files are answer samples of ONE run (--run-id): file i is sample i, in the order given.")
@store_option
@dataset_option
def import_cmd(files: tuple[str, ...], run_id: str | None, replace: bool, as_samples: bool, store_dir: str | None,
               dataset_path: str | None) -> None:
    """Import reference-runner result files (JSONL) as runs, one run per file, each all or nothing.

    FILES: files, a directory (its *.jsonl) or a quoted glob; each run is named after its file."""
    from pathlib import Path

    from toolkit.dataset import load_dataset  # (import and export only: summary and sql never load jsonschema)
    from toolkit.reference import (ImportFailure, ImportInterrupted, import_many, import_reference, import_samples,
                                   printable, result_files)

    if as_samples:
        if run_id is None:
            raise CommandError(["--as-samples: name the run the files become with --run-id"])
        paths = result_files(list(files))
        if len(paths) < 2:
            raise CommandError([f"--as-samples: needs two or more result files (got {len(paths)})"])
        store = open_store(store_dir)
        _print_report(import_samples(store, paths, load_dataset(dataset_path), run_id, replace), paths[0])
        return

    single = len(files) == 1 and not Path(files[0]).is_dir() and (
        Path(files[0]).exists() or not any(c in files[0] for c in "*?["))
    paths = [Path(files[0])] if single else result_files(list(files))
    if run_id is not None and len(paths) > 1:
        raise CommandError([f"--run-id: names one run but {len(paths)} files were given "
                            "(drop it: each run is named after its file)"])
    store = open_store(store_dir)
    dataset = load_dataset(dataset_path)
    try:
        if single:  # one file: its failure is the command's own (its error and exit status)
            _print_report(import_reference(store, paths[0], dataset, run_id, replace), paths[0])
            return
        results = import_many(store, paths, dataset, replace, run_id)
    except ImportInterrupted as stopped:  # Ctrl-C: the runs made before it are named, then its one line
        for path, report in stopped.done:
            _print_report(report, path)
        raise Interrupted() from None
    # Files whose runs the store has already (a folder imported again): one line for all of them, not one each.
    stored = [p for p, r in zip(paths, results) if isinstance(r, ImportFailure) and r.exists]
    for path, result in zip(paths, results):
        if not isinstance(result, ImportFailure):
            _print_report(result, path)
        elif not (result.exists and len(stored) > 1):
            error_line(result.message)
    if len(stored) > 1:
        names = ", ".join(printable(p.name) for p in stored[:3]) + (f" and {len(stored) - 3} more" * (len(stored) > 3))
        error_line(f"{len(stored)} of the files are of runs already in {printable(str(store.root))} ({names}): "
                   "pass --replace to replace them")
    failed = sum(isinstance(r, ImportFailure) for r in results)
    if failed:
        say(f"bedside: imported {len(paths) - failed} of {len(paths)} files; {failed} not imported (above)", err=True)
        raise click.exceptions.Exit(1)


def _print_report(report, file) -> None:
    verb = "replaced" if report.replaced else "imported"
    say(f"{verb} {report.run_id}: {report.rows} rows, {report.completed_cases} completed cases, "
               f"{report.error_rows} error rows" + (f", {report.skipped_rows} rows of cases outside the dataset skipped"
                                                    if report.skipped_rows else ""))
    for warning in report.warnings:
        say(f"warning: {warning}", err=True)
    for d in report.disagreements:
        say(f"warning: {d.file or file}:{d.line}: case {d.case_id}: file score {d.file_score!r} "
                   f"but the rubric gives {d.recomputed!r}", err=True)


@click.command("export")
@one_run_option("Run to export.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output .jsonl path.")
@store_option
def export_cmd(run_id: str, out: str, store_dir: str | None) -> None:
    """Write a run as reference-format JSONL plus <out>.summary.json.

    A run with several answer samples: one such pair per sample, <out>.sample<i>.jsonl (i from 0)."""
    import shlex

    from toolkit.reference import export_samples

    pairs = export_samples(open_store(store_dir), run_id, out)
    for rows, summary in pairs:
        say(f"wrote {rows} and {summary}")
    if len(pairs) > 1:  # imported as a folder, each file would be a run of its own
        files = " ".join(shlex.quote(str(rows)) for rows, _ in pairs)
        say(f"they import back as one run of {len(pairs)} samples: bedside import {files} "
            f"--run-id {shlex.quote(run_id)} --as-samples")


INTERVALS_NOTE = ("note: ci95 is the reference runner's percentile bootstrap interval over cases (bit-exact; "
                  "answer and judge variance are inside it, a judge's systematic bias is not); `bedside compare` "
                  "computes its own intervals")


@click.command("summary")
@run_options
@click.option("--order", type=click.Choice(["auto", "reference", "dataset"]), default="auto", show_default=True,
              help="Bootstrap order: reference (completion order, as the reference runner), dataset, or auto "
                   "(reference for imported runs, dataset for collected ones).")
@json_option("Print {run id: reference summary} as JSON.")
@judge_options()
@resample_options()
@store_option
@wide_option
def summary_cmd(runs: RunChoice, order: str, as_json: bool, selection: JudgeSelection, samples: int, seed: int,
                store_dir: str | None) -> None:
    """Reference summaries: means and 95% bootstrap intervals per benchmark and overall."""
    store = open_store(store_dir)
    ids = selected_runs(store, runs)
    options = SummaryOptions(order=order, bootstrap=BootstrapSettings(samples=samples, seed=seed), selection=selection)
    summaries = summarize(store, ids, options)
    method = ci_method(options.bootstrap)
    if as_json:  # the reference's summary object and, after it, bedside's name of its interval
        click.echo(dumps({run_id: {**s, "ci_method": method} for run_id, s in summaries.items()},
                         indent=2))  # valid JSON: NaN (a mean over no case) becomes null
        return
    for run_id, s in summaries.items():
        lo, hi = s["overall_ci95"]
        say(f"\n{run_id}  answer={s['answer_model']}  judge={s['judge_model']}  "
                   f"passes={s['judge_passes_per_answer']}  completed={s['completed_cases']}  errors={s['errors']}")
        rows = [{"benchmark": name, "n": b["n"], "mean": b["mean"], "ci95_low": b["ci95"][0], "ci95_high": b["ci95"][1]}
                for name, b in s["benchmarks"].items()]
        rows.append({"benchmark": "OVERALL (macro)", "n": s["completed_cases"], "mean": s["overall_macro_mean"],
                     "ci95_low": lo, "ci95_high": hi})
        emit(pl.DataFrame(rows), "table", title=f"95% intervals: {method}")
    click.echo(INTERVALS_NOTE, err=True)
    say_small_sizes(min((b["n"] for s in summaries.values() for b in s["benchmarks"].values()), default=None))


def say_small_sizes(smallest: int | None) -> None:
    """After INTERVALS_NOTE: the reference's interval under-covers below ~25 cases in a benchmark."""
    if smallest is not None and smallest < 25:  # a small store only pays for the import
        from toolkit.analysis.paired import small_sample_note

        for note in small_sample_note(smallest, paired=False):
            click.echo(f"note: {note} (the reference's interval covers 87.5 % at 3 cases, 93.5 % at 10: "
                       "docs/methods.md)", err=True)


class _QueryCommand(click.Command):
    """``sql``: a query that starts with ``--`` (an SQL comment) would be read as an option; say how to
    pass it rather than click's "no such option"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:
            if arg == "--":
                break
            if arg.startswith("--") and any(c.isspace() for c in arg.partition("=")[0]):
                error = CommandError(['sql: a query that starts with "--" must follow a "--" separator, after '
                                      'the options: bedside sql [OPTIONS] -- "-- my query ..."'])
                error.exit_code = 2
                raise error
        return super().parse_args(ctx, args)


MAX_ROWS = 1000  # rows a table shows by default: the rest are counted, not held


def _sql_help() -> str:
    """``sql``'s help, its list of what a query can name generated from the views' definitions."""
    from toolkit.sql import relation_names

    names = "; ".join(f"{kind} {', '.join(found)}" for kind, found in relation_names().items())
    return f"""Run one read-only SQL statement over the store's tables and score views.

    Names: {names}. Score views name their judge (judge_model, primary_judge): the *_by_judge views hold
    every judge's scores, the others the primary judge's.
    Reads the store's current files and nothing else; statements that write are refused.

    CSV is for spreadsheets: a text cell starting with = + - @ TAB or CR is written with a ' in front
    (numbers are never changed); --raw-csv writes text as stored. A query that starts with an SQL
    comment goes last, after a -- separator: bedside sql --format csv -- "-- note ..."."""


@click.command("sql", cls=_QueryCommand, help=_sql_help())
@click.argument("query")
@format_option
@click.option("--max-rows", type=click.IntRange(min=1), default=None,
              help=f"Table format: show at most this many rows (default {MAX_ROWS:,}) and count the rest; "
                   "csv and json print every row.")
@click.option("--raw-csv", is_flag=True,
              help="With --format csv: text exactly as stored, for programs; by default a text cell that starts "
                   "with = + - @ TAB or CR gets a ' in front, so a spreadsheet does not run it as a formula.")
@store_option
def sql_cmd(query: str, fmt: str, max_rows: int | None, raw_csv: bool, store_dir: str | None) -> None:
    import duckdb

    from toolkit.sql import SQLRefused, query as run_query, query_head

    if raw_csv and fmt != "csv":
        raise CommandError(["--raw-csv: only with --format csv"])
    if max_rows is not None and fmt != "table":
        raise CommandError([f"--max-rows: only for the table format (--format {fmt} prints every row; "
                            "add LIMIT to the query for fewer)"])
    store = open_store(store_dir)
    if not store.root.is_dir():
        raise CommandError([f"{store.root}: no store here (give --store DIR or set BEDSIDE_STORE)"])
    try:
        if fmt == "table":
            shown = max_rows or MAX_ROWS
            rest, counted = query_head(store, query, shown, lambda frame: emit(frame, "table"))
            if rest:
                click.echo(_not_shown(shown, rest, counted), err=True)
            return
        frame = run_query(store, query)
    except SQLRefused as error:
        raise CommandError([f"SQL: refused: {error}"]) from None
    except (KeyboardInterrupt, duckdb.InterruptException):  # Ctrl-C: one line, exit 130
        raise Interrupted() from None
    except duckdb.Error as error:
        raise CommandError([f"SQL: {str(error).splitlines()[0]}"]) from None
    frame = _printable(frame, fmt)
    if fmt == "csv":
        from toolkit.text import write_csv

        sys.stdout.write(write_csv(frame, raw=raw_csv))
    else:
        emit(frame, fmt)


def _not_shown(shown: int, rest: int, counted: bool) -> str:
    """The line after a table cut at ``shown`` rows."""
    if counted:
        head = f"sql: {rest:,} more row{'s' if rest != 1 else ''} not shown (the first {shown:,} of {shown + rest:,})"
    else:
        head = f"sql: at least {rest:,} more rows not shown (counting stopped after a few seconds)"
    return head + "; --max-rows N shows more, --format csv or json prints every row"


def _printable(frame: pl.DataFrame, fmt: str) -> pl.DataFrame:
    """CSV cannot hold nested values: lists and structs become JSON text. JSON has no NaN or
    Infinity: non-finite floats become null."""
    if fmt == "table":
        return frame
    opaque = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.Extension)]
    if opaque and fmt == "csv":  # e.g. DuckDB's VARIANT: its Arrow form is binary, meaningless as text
        kind = frame.schema[opaque[0]].ext_name()
        raise CommandError([f"SQL: column {opaque[0]}: its type ({kind}) has no CSV form; "
                            f"select it as text ({opaque[0]}::VARCHAR)"])
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested() or dtype == pl.Object]
    if fmt == "csv":
        return frame.with_columns(
            pl.Series(name, [None if v is None else dumps(v, default=_plain, ensure_ascii=False)
                             for v in frame[name].to_list()], dtype=pl.String) for name in nested)
    frame = frame.cast({name: _decimals_as_floats(dtype) for name, dtype in frame.schema.items()})  # numbers, not text
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()]
    floats = [name for name, dtype in frame.schema.items() if dtype.is_float()]
    return frame.with_columns(
        *(pl.when(pl.col(name).is_finite()).then(pl.col(name)).alias(name) for name in floats),
        *(pl.Series(name, finite_or_none(frame[name].to_list()), dtype=frame.schema[name]) for name in nested))


def _decimals_as_floats(dtype: pl.DataType) -> pl.DataType:
    if isinstance(dtype, pl.Decimal):
        return pl.Float64()
    if isinstance(dtype, pl.List):
        return pl.List(_decimals_as_floats(dtype.inner))
    if isinstance(dtype, pl.Array):
        return pl.Array(_decimals_as_floats(dtype.inner), dtype.shape)
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _decimals_as_floats(f.dtype)) for f in dtype.fields])
    return dtype


def _plain(value: object) -> object:
    """JSON for what json cannot write: a DECIMAL as a number, dates and the rest as text."""
    return float(value) if isinstance(value, Decimal) else str(value)
