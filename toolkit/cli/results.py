"""``bedside import | export | summary | sql``: reference interop and the store's numbers."""

from __future__ import annotations

import click
import polars as pl

from toolkit.bootstrap import BootstrapSettings
from toolkit.cli.common import (CommandError, dataset_option, emit, format_option, open_store, selected_runs,
                                store_option)
from toolkit.dataset import load_dataset
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED
from toolkit.reference import export_reference, import_reference
from toolkit.selection import JudgeSelection
from toolkit.sql import connect, referenced
from toolkit.summary import SummaryOptions, summarize, to_json


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
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--run-id", default=None, help="Run id (default: the file name without .jsonl).")
@click.option("--replace", is_flag=True, help="Replace an existing run with this id.")
@store_option
@dataset_option
def import_cmd(file: str, run_id: str | None, replace: bool, store_dir: str | None, dataset_path: str | None) -> None:
    """Import a reference-runner result file (JSONL) as a run."""
    store = open_store(store_dir)
    report = import_reference(store, file, load_dataset(dataset_path), run_id, replace)
    click.echo(f"imported {report.run_id}: {report.rows} rows, {report.completed_cases} completed cases, "
               f"{report.error_rows} error rows" + (f", {report.skipped_rows} rows of cases outside the dataset skipped"
                                                    if report.skipped_rows else ""))
    for d in report.disagreements:
        click.echo(f"warning: {file}:{d.line}: case {d.case_id}: file score {d.file_score!r} "
                   f"but the rubric gives {d.recomputed!r}", err=True)


@click.command("export")
@click.option("--run", "run_id", required=True, help="Run to export.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output .jsonl path.")
@store_option
def export_cmd(run_id: str, out: str, store_dir: str | None) -> None:
    """Write a run as reference-format JSONL plus <out>.summary.json."""
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
def summary_cmd(runs: tuple[str, ...], all_runs: bool, order: str, as_json: bool, judge: str | None,
                passes: tuple[int, ...], samples: int, seed: int, store_dir: str | None) -> None:
    """Reference summaries: means and 95% bootstrap intervals per benchmark and overall."""
    store = open_store(store_dir)
    ids = selected_runs(store, runs, all_runs)
    options = SummaryOptions(order=order, bootstrap=BootstrapSettings(samples=samples, seed=seed),
                             selection=JudgeSelection(judge=judge, passes=tuple(passes) or None))
    summaries = summarize(store, ids, options)
    if as_json:
        click.echo(to_json(summaries))
        return
    for run_id, s in summaries.items():
        lo, hi = s["overall_ci95"]
        click.echo(f"\n{run_id}  answer={s['answer_model']}  judge={s['judge_model']}  "
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
    """Run SQL over the store: tables runs, answers, judgments, decisions, cases, rubric_items and
    derived pass_scores, case_scores, benchmark_scores, run_summary."""
    import duckdb

    store = open_store(store_dir)
    if not store.root.is_dir():
        raise CommandError([f"{store.root}: no store here (give --store DIR or set BEDSIDE_STORE)"])
    con = connect(store, derived=referenced(query))
    try:
        result = con.sql(query)
        frame = result.pl() if result is not None else None
    except duckdb.Error as error:
        raise CommandError([f"SQL: {str(error).splitlines()[0]}"]) from None
    if frame is not None:
        emit(frame, fmt)
