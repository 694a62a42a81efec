"""``bedside import | export | summary | sql``: reference interop and the store's numbers."""

from __future__ import annotations

from decimal import Decimal

import click
import polars as pl

from toolkit.bootstrap import BootstrapSettings
from toolkit.cli.common import (CommandError, Interrupted, dataset_option, emit, error_line, format_option,
                                open_store, say, selected_runs, store_option, wide_option)
from toolkit.inputs import dumps, finite_or_none
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED
from toolkit.selection import JudgeSelection
from toolkit.summary import SummaryOptions, summarize


def selection_options(func):
    func = click.option("--judge", default=None, help="Score with this judge model (default: each run's judge).")(func)
    func = click.option("--pass", "passes", type=int, multiple=True, help="Judge pass(es) to use (default: all).")(func)
    return func


def bootstrap_options(func):
    func = click.option("--samples", type=int, default=BOOTSTRAP_SAMPLES, show_default=True,
                        help="Bootstrap resamples.")(func)
    func = click.option("--seed", type=int, default=BOOTSTRAP_SEED, show_default=True, help="Bootstrap seed.")(func)
    return func


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--run-id", default=None, help="Run id (default: the file name without .jsonl).")
@click.option("--replace", is_flag=True, help="Replace an existing run with this id.")
@store_option
@dataset_option
def import_cmd(files: tuple[str, ...], run_id: str | None, replace: bool, store_dir: str | None,
               dataset_path: str | None) -> None:
    """Import reference-runner result files (JSONL) as runs, one store commit per file.

    FILES: files, a directory (its *.jsonl) or a quoted glob; each run is named after its file."""
    from pathlib import Path

    from toolkit.dataset import load_dataset  # (import and export only: summary and sql never load jsonschema)
    from toolkit.reference import ImportFailure, import_many, import_reference, result_files

    single = len(files) == 1 and not Path(files[0]).is_dir() and (
        Path(files[0]).exists() or not any(c in files[0] for c in "*?["))
    paths = [Path(files[0])] if single else result_files(list(files))
    if run_id is not None and len(paths) > 1:
        raise CommandError([f"--run-id: names one run but {len(paths)} files were given "
                            "(drop it: each run is named after its file)"])
    store = open_store(store_dir)
    dataset = load_dataset(dataset_path)
    if single:  # one file: its failure is the command's (exactly as before bulk import)
        _print_report(import_reference(store, paths[0], dataset, run_id, replace), paths[0])
        return
    failed = 0
    for path, result in zip(paths, import_many(store, paths, dataset, replace, run_id)):
        if isinstance(result, ImportFailure):
            failed += 1
            error_line(result.message)
        else:
            _print_report(result, path)
    if failed:
        raise click.exceptions.Exit(1)


def _print_report(report, file) -> None:
    say(f"imported {report.run_id}: {report.rows} rows, {report.completed_cases} completed cases, "
               f"{report.error_rows} error rows" + (f", {report.skipped_rows} rows of cases outside the dataset skipped"
                                                    if report.skipped_rows else ""))
    for d in report.disagreements:
        say(f"warning: {file}:{d.line}: case {d.case_id}: file score {d.file_score!r} "
                   f"but the rubric gives {d.recomputed!r}", err=True)


@click.command("export")
@click.option("--run", "run_id", required=True, help="Run to export.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output .jsonl path.")
@store_option
def export_cmd(run_id: str, out: str, store_dir: str | None) -> None:
    """Write a run as reference-format JSONL plus <out>.summary.json."""
    from toolkit.reference import export_reference

    rows, summary = export_reference(open_store(store_dir), run_id, out)
    click.echo(f"wrote {rows} and {summary}")


@click.command("summary")
@click.option("--run", "runs", multiple=True, help="Run id (repeatable).")
@click.option("--all", "all_runs", is_flag=True, help="Every run in the store.")
@click.option("--order", type=click.Choice(["auto", "reference", "dataset"]), default="auto", show_default=True,
              help="Bootstrap order: reference (completion order, as the reference runner), dataset, or auto "
                   "(reference for imported runs, dataset for collected ones).")
@click.option("--json", "as_json", is_flag=True, help="Print {run id: reference summary} as JSON.")
@selection_options
@bootstrap_options
@store_option
@wide_option
def summary_cmd(runs: tuple[str, ...], all_runs: bool, order: str, as_json: bool, judge: str | None,
                passes: tuple[int, ...], samples: int, seed: int, store_dir: str | None) -> None:
    """Reference summaries: means and 95% bootstrap intervals per benchmark and overall."""
    store = open_store(store_dir)
    ids = selected_runs(store, runs, all_runs)
    options = SummaryOptions(order=order, bootstrap=BootstrapSettings(samples=samples, seed=seed),
                             selection=JudgeSelection(judge=judge, passes=tuple(passes) or None))
    summaries = summarize(store, ids, options)
    if as_json:
        click.echo(dumps(summaries, indent=2))  # valid JSON: NaN (a mean over no case) becomes null
        return
    for run_id, s in summaries.items():
        lo, hi = s["overall_ci95"]
        say(f"\n{run_id}  answer={s['answer_model']}  judge={s['judge_model']}  "
                   f"passes={s['judge_passes_per_answer']}  completed={s['completed_cases']}  errors={s['errors']}")
        rows = [{"benchmark": name, "n": b["n"], "mean": b["mean"], "ci95_low": b["ci95"][0], "ci95_high": b["ci95"][1]}
                for name, b in s["benchmarks"].items()]
        rows.append({"benchmark": "OVERALL (macro)", "n": s["completed_cases"], "mean": s["overall_macro_mean"],
                     "ci95_low": lo, "ci95_high": hi})
        emit(pl.DataFrame(rows), "table")


@click.command("sql")
@click.argument("query")
@format_option
@store_option
def sql_cmd(query: str, fmt: str, store_dir: str | None) -> None:
    """Run one read-only SQL statement over the store: tables runs, answers, judgments, decisions,
    cases, rubric_items and derived pass_scores, case_scores, benchmark_scores, run_summary.
    Reads the store's current files and nothing else; statements that write are refused."""
    import duckdb

    from toolkit.sql import SQLRefused, query as run_query

    store = open_store(store_dir)
    if not store.root.is_dir():
        raise CommandError([f"{store.root}: no store here (give --store DIR or set BEDSIDE_STORE)"])
    try:
        frame = run_query(store, query)
    except SQLRefused as error:
        raise CommandError([f"SQL: refused: {error}"]) from None
    except (KeyboardInterrupt, duckdb.InterruptException):  # Ctrl-C: one line, exit 130
        raise Interrupted() from None
    except duckdb.Error as error:
        raise CommandError([f"SQL: {str(error).splitlines()[0]}"]) from None
    emit(_printable(frame, fmt), fmt)


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
