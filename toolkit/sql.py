"""A DuckDB connection over the store: every table as a view, plus derived relations.

Derived relations: ``pass_scores`` (run x case x judge x pass), ``case_scores``
(run x case, mean over the primary judge's passes), ``benchmark_scores`` and
``run_summary`` (exact means and bootstrap intervals of ``toolkit.summary``).
Scores are computed in polars (exact Python rounding) and registered as Arrow
tables; the summaries are only computed when asked for, since they bootstrap.
"""

from __future__ import annotations

import duckdb
import polars as pl

from toolkit.selection import latest_valid_decisions, per_case, read_runs, scored_passes
from toolkit.store import Store
from toolkit.summary import SummaryOptions, resolve_order, summarize_data
from toolkit.tables import TABLES

DERIVED = ("pass_scores", "case_scores", "benchmark_scores", "run_summary")


def connect(store: Store, derived: tuple[str, ...] = DERIVED, options: SummaryOptions = SummaryOptions()) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's tables as views and the ``derived`` relations."""
    con = duckdb.connect()
    for name, table in TABLES.items():
        files = store.files(name)
        if files:
            paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet([{paths}], union_by_name = true)')
        else:
            con.register(f"_empty_{name}", table.schema.empty_table())
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "_empty_{name}"')
    wanted = [d for d in DERIVED if d in derived]
    if not wanted:
        return con
    frames = derived_frames(store, store.run_ids(), tuple(wanted), options)
    for name in wanted:
        con.register(name, frames[name].to_arrow())
    return con


def derived_frames(store: Store, run_ids: list[str], wanted: tuple[str, ...],
                   options: SummaryOptions = SummaryOptions()) -> dict[str, pl.DataFrame]:
    data = read_runs(store, run_ids, texts=False)
    out: dict[str, pl.DataFrame] = {}
    if "pass_scores" in wanted:
        out["pass_scores"] = scored_passes(data, latest_valid_decisions(data.judgments, data.decisions))
    if "case_scores" in wanted:
        out["case_scores"] = per_case(data, options.selection)
    if "benchmark_scores" in wanted or "run_summary" in wanted:
        summaries = summarize_data(data, run_ids, options)
        runs = {r["run_id"]: r for r in data.runs.iter_rows(named=True)}
        out["benchmark_scores"] = pl.DataFrame(
            [{"run_id": rid, "benchmark": name, "n": b["n"], "mean": b["mean"],
              "ci_low": b["ci95"][0], "ci_high": b["ci95"][1]}
             for rid, s in summaries.items() for name, b in s["benchmarks"].items()],
            schema={"run_id": pl.String, "benchmark": pl.String, "n": pl.Int64, "mean": pl.Float64,
                    "ci_low": pl.Float64, "ci_high": pl.Float64})
        out["run_summary"] = pl.DataFrame(
            [{"run_id": rid, "answer_model": s["answer_model"], "judge_model": s["judge_model"],
              "source": runs[rid]["source"], "dataset_sha256": s["dataset_sha256"],
              "completed_cases": s["completed_cases"], "errors": s["errors"],
              "overall_macro_mean": s["overall_macro_mean"], "ci_low": s["overall_ci95"][0],
              "ci_high": s["overall_ci95"][1], "judge_passes_per_answer": s["judge_passes_per_answer"],
              "order": resolve_order(options.order, runs[rid]),
              "started_at": s["started_at"], "finished_at": s["finished_at"]} for rid, s in summaries.items()],
            schema={"run_id": pl.String, "answer_model": pl.String, "judge_model": pl.String, "source": pl.String,
                    "dataset_sha256": pl.String, "completed_cases": pl.Int64, "errors": pl.Int64,
                    "overall_macro_mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                    "judge_passes_per_answer": pl.Int64, "order": pl.String, "started_at": pl.String,
                    "finished_at": pl.String})
    return out


def referenced(query: str) -> tuple[str, ...]:
    """Derived relations a query names (so a plain query does not pay for the bootstrap)."""
    lowered = query.lower()
    return tuple(d for d in DERIVED if d in lowered)
