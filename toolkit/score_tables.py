"""The score tables (``toolkit.tables.SCORE_TABLES``) of runs, computed by the toolkit's own scoring.

Every commit stores its run's score tables (``store_scores`` registers ``score_commits`` with the store), so
SQL, the ``db`` file and notebooks read numbers the toolkit computed once, in polars. Readers compute them
here too for what is not stored: runs written before scores were stored, and selections other than the
stored one (another judge, some passes, another order).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from toolkit.listing import LISTING, dump_facts, listing_facts
from toolkit.scoring import reliability_scores
from toolkit.selection import (JudgeSelection, RunData, latest_valid_decisions, per_case, per_sample, read_columns,
                               read_runs, scored_passes)
from toolkit.store import Store, StoreError
from toolkit.store.transaction import Transaction, read_together
from toolkit.summary import (SummaryOptions, benchmark_means, macro_mean, ordered_cases, resolve_order,
                             run_facts)
from toolkit.tables import BY_JUDGE as BY_JUDGE_TABLES, LATER_SCORES, SCORE_TABLES, polars_schema, to_arrow

LEVELS = tuple(SCORE_TABLES)  # pass, sample, case, benchmark, reliability, by-judge scores, run_summary (last)
BY_JUDGE = tuple(t.name for t in BY_JUDGE_TABLES)  # benchmark_scores, run_summary of every judge: computed together
EVERY_JUDGE = ("pass_scores", *BY_JUDGE)  # score tables of every judge and pass, whatever the selection


def _typed(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    schema = polars_schema(table)
    return frame.select(list(schema)).cast(schema)


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema(table))


def score_tables(data: RunData, options: SummaryOptions = SummaryOptions(),
                 levels: tuple[str, ...] = LEVELS) -> dict[str, pl.DataFrame]:
    """The score tables of every run in ``data`` under ``options`` (its judge, passes and order; pass scores
    do not depend on them: every judge and pass), each in its schema's columns and a fixed row order.
    Computed from the rows, never taken from what is stored."""
    data = replace(data, stored_cases=None)
    out: dict[str, pl.DataFrame] = {}
    if "pass_scores" in levels:
        passes = scored_passes(data, latest_valid_decisions(data.judgments, data.decisions))
        out["pass_scores"] = _typed("pass_scores", passes.sort("run_id", "case_id", "sample", "judge_model",
                                                               "judge_pass"))
    if {"sample_scores", "reliability_scores"} & set(levels):
        samples = per_sample(data, options.selection)
        out["sample_scores"] = _typed("sample_scores", samples)
        out["reliability_scores"] = _typed("reliability_scores", reliability_scores(samples))
    if not {"case_scores", "benchmark_scores", "run_summary", *BY_JUDGE} & set(levels):
        return {t: f for t, f in out.items() if t in levels}
    cases = per_case(data, options.selection)
    out["case_scores"] = _typed("case_scores", cases.sort("run_id", "position"))
    out["benchmark_scores"], out["run_summary"] = _summaries(data, cases, options)
    if BY_JUDGE[0] in levels:
        out.update(_by_judge(data, out if options.is_stored else None))
    return {t: f for t, f in out.items() if t in levels}


def _summaries(data: RunData, cases: pl.DataFrame, options: SummaryOptions) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The benchmark_scores and run_summary rows of every run in ``data`` from its ``per_case`` rows."""
    facts = run_facts(data, options.selection)
    bench_rows, run_rows = [], []
    for run in data.runs.iter_rows(named=True):
        order = resolve_order(options.order, run)
        frame = ordered_cases(cases.filter(pl.col("run_id") == run["run_id"]), order)
        values = {b[0]: s["score"].to_list() for b, s in frame.group_by("benchmark", maintain_order=True)}
        means = benchmark_means({n: values[n] for n in sorted(values)})
        bench_rows += [{"run_id": run["run_id"], "benchmark": n, "n": k, "mean": m} for n, (k, m) in means.items()]
        fact = facts.get(run["run_id"], {})
        run_rows.append({
            "run_id": run["run_id"], "answer_model": fact.get("answer_model"), "judge_model": fact.get("judge_model"),
            "source": run["source"], "dataset_sha256": run["dataset_sha256"], "completed_cases": frame.height,
            "errors": fact.get("errors", 0), "overall_macro_mean": _null_nan(macro_mean([m for _, m in means.values()])),
            "judge_passes_per_answer": fact.get("passes", 1), "order": order,
            "started_at": fact.get("started_at"), "finished_at": fact.get("finished_at")})
    return (pl.from_arrow(to_arrow("benchmark_scores", bench_rows)),
            pl.from_arrow(to_arrow("run_summary", run_rows)))


def _by_judge(data: RunData, primary: dict[str, pl.DataFrame] | None) -> dict[str, pl.DataFrame]:
    """benchmark_scores and run_summary of every judge with a valid reply in each run, as those tables are of
    the primary judge (all passes, the auto order); ``primary``: those tables already computed so (reused)."""
    judges = (data.judgments.filter(pl.col("error").is_null()).select("run_id", "judge_model").unique()
              .join(data.runs.select("run_id", pl.col("judge_model").alias("_primary")), on="run_id")
              .with_columns(primary_judge=pl.col("judge_model") == pl.col("_primary")).drop("_primary"))
    parts: dict[str, list[pl.DataFrame]] = {t: [] for t in BY_JUDGE}
    for (judge,), of_judge in judges.sort("judge_model").partition_by("judge_model", as_dict=True).items():
        for primary_judge, runs in of_judge.partition_by("primary_judge", as_dict=True).items():
            run_ids = runs["run_id"].to_list()
            if primary_judge[0] and primary is not None:
                bench, summary = (primary[t].filter(pl.col("run_id").is_in(run_ids))
                                  for t in ("benchmark_scores", "run_summary"))
            else:
                sub = data.of(run_ids)
                options = SummaryOptions(selection=JudgeSelection(judge=judge))
                bench, summary = _summaries(sub, per_case(sub, options.selection), options)
            marks = [pl.lit(judge).alias("judge_model"), pl.lit(primary_judge[0]).alias("primary_judge")]
            parts[BY_JUDGE[0]].append(_typed(BY_JUDGE[0], bench.with_columns(marks)))
            parts[BY_JUDGE[1]].append(_typed(BY_JUDGE[1], summary.drop("judge_model").with_columns(marks)))
    return {t: pl.concat(f).sort("run_id", "judge_model", *(("benchmark",) if t == BY_JUDGE[0] else ()))
            if f else empty(t) for t, f in parts.items()}


def _null_nan(value: float) -> float | None:
    """NULL, not NaN, for a run with no completed case: SQL sorts NaN above every number (a run with no
    answers would lead a leaderboard ordered by its mean) and ``summary --json`` says null."""
    return None if value != value else value


def score_commits(batch: list[tuple[Transaction, dict]]) -> list[dict | None]:
    """The store's scorer (``Store.score_with``): the score tables of each run as its transaction will commit
    it, and under "runs" the columns of its runs row it sets (``listing``: ``toolkit.listing.listing_facts``),
    computed for all runs of one dataset at once; None for a run whose dataset is not stored (readers
    then say so). ValueError when some run's decisions do not fit the rubric (the store then scores the runs
    one by one)."""
    out: list[dict | None] = [None] * len(batch)
    by_dataset: dict[str, list[int]] = {}
    for i, (txn, run_row) in enumerate(batch):
        by_dataset.setdefault(run_row.get("dataset_sha256") or "", []).append(i)
    for sha, indices in by_dataset.items():
        store = batch[indices[0]][0].store
        if not sha or not store.has_dataset(sha):
            continue
        txns = [batch[i][0] for i in indices]
        runs = pl.from_arrow(to_arrow("runs", [{**batch[i][1], "run_id": batch[i][0].run_id} for i in indices]))

        def read(table: str) -> pl.DataFrame:  # as ``read_runs(texts=False)`` reads it
            return read_together(txns, table, read_columns(table, texts=False))

        data = RunData(runs, read("answers"), read("judgments"), read("decisions"),
                       store.read("cases", keys=[sha]), store.read("rubric_items", keys=[sha]))
        per_run: dict[str, dict] = {txn.run_id: {} for txn in txns}
        tables = score_tables(data)
        for table, frame in tables.items():
            for (run_id,), rows in frame.partition_by("run_id", as_dict=True, maintain_order=True).items():
                per_run[run_id][table] = rows.to_arrow()
        # What ``bedside runs`` lists of each run, from the same rows and case scores: stored in its runs row.
        for run_id, facts in listing_facts(data, tables["case_scores"]).items():
            per_run[run_id]["runs"] = {LISTING: dump_facts(facts)}
        for i, txn in zip(indices, txns):
            out[i] = per_run[txn.run_id]
    return out


def store_scores() -> None:
    """Have this process's commits store their runs' score tables (the writers call it once)."""
    Store.score_with(score_commits)


def computed(store: Store, options: SummaryOptions = SummaryOptions()) -> dict[str, pl.DataFrame]:
    """What readers of the stored score tables add: every level for the runs with none stored, and (for a
    selection other than the stored one) the case, benchmark and run levels of every run. A run that cannot
    be scored (its dataset not stored, decisions outside the rubric) has no rows, as in the stored tables."""
    unscored = set(store.unscored())
    # Runs whose scores were stored before a later score table existed: those rows alone are computed.
    stale = {t: set(store.unscored(table=t)) - unscored for t in LATER_SCORES}
    later = set().union(*stale.values())
    run_ids = [r for r in store.run_ids() if r in unscored or r in later or not options.is_stored]
    out: dict[str, list[pl.DataFrame]] = {t: [] for t in LEVELS}

    def add(ids: list[str]) -> None:
        data = read_runs(store, ids, texts=False)
        frames = score_tables(data, options, tuple(t for t in LEVELS if t not in BY_JUDGE))
        # every judge's: as stored, whatever the selection; only for the runs that have none stored
        need = [r for r in ids if r in unscored or any(r in stale[t] for t in BY_JUDGE)]
        if need:
            frames.update(score_tables(data.of(need), SummaryOptions(), BY_JUDGE))
        for table, frame in frames.items():
            if table in EVERY_JUDGE or options.is_stored:
                frame = frame.filter(pl.col("run_id").is_in(list(unscored | stale.get(table, set()))))
            out[table].append(frame)

    if run_ids:
        try:
            add(run_ids)
        except (ValueError, StoreError):  # run by run, leaving out those that cannot be scored
            out = {t: [] for t in LEVELS}
            for run_id in run_ids:
                try:
                    add([run_id])
                except (ValueError, StoreError):  # raised before any of its rows were added
                    pass
    return {t: pl.concat(frames) if frames else empty(t) for t, frames in out.items()}
