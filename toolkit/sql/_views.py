"""The store's tables and score tables as DuckDB SQL, defined once.

``bedside sql`` / ``bs.connect`` (in memory) and ``bedside db`` (a database file) both run these
statements, and ``schemas/tables.md``'s data dictionary is generated from them. Only SQL that a plain
DuckDB runs (no extension): views, and a few small tables.

No arithmetic here: the derived views show the score tables the toolkit computed (``toolkit.score_tables``)
and stored with each commit, so their numbers are the toolkit's. The schema ``_bedside`` holds what the views
read besides the tables: ``_bedside.stored_<score table>`` (views of the stored score tables' files),
``_bedside.computed_<score table>`` (rows the toolkit computed when the connection or file was made: runs
with no scores stored, and every run for a selection other than the stored one) and ``_bedside.options``
(that selection, for the refreshes of a ``db`` file). Bootstrap intervals are not stored: ``run_intervals`` is
a table the writer fills, stamped with each run's ``updated_at``; the views show an interval only while the
run is unchanged since then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from toolkit.selection import JudgeSelection
from toolkit.summary import SummaryOptions
from toolkit.tables import BY_JUDGE, FILLED, LATER_SCORES, SCORE_TABLES, STORED, TABLES

# Storage columns the views leave out: ``runs.write_ids`` is the store's commit point, ``runs.listing`` what
# ``bedside runs`` lists of the run, kept for it: neither is data.
HIDDEN = {"runs": ("write_ids", "listing")}
_DUCK_TYPES = {"string": "VARCHAR", "int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}
INTERNAL = "_bedside"
EVERY_JUDGE = ("pass_scores", *(t.name for t in BY_JUDGE))  # rows of every judge, whatever the selection
_CI = {"benchmark_scores": (("ci_low", "DOUBLE", "Bootstrap 95% interval, low end (from run_intervals; null when "
                                                 "stale or not computed)."),
                            ("ci_high", "DOUBLE", "Bootstrap 95% interval, high end (likewise)."),
                            ("ci_method", "VARCHAR", "The interval's method, e.g. 'percentile bootstrap (reference, "
                                                     "10,000 resamples)': the reference runner's, as `bedside "
                                                     "summary` shows (`bedside compare` and the report show "
                                                     "stratified t intervals); null with the interval.")),
       "run_summary": (("ci_low", "DOUBLE", "Bootstrap 95% interval of the macro mean, low end (run_intervals; "
                                            "null when stale)."),
                       ("ci_high", "DOUBLE", "Likewise, high end."),
                       ("ci_method", "VARCHAR", "The interval's method, as in `benchmark_scores`."))}
_CI_AFTER = {"benchmark_scores": "mean", "run_summary": "overall_macro_mean"}
# Whose scores a view holds, shown beside them (not stored: the selection's judge, looked up in ``runs``).
_JUDGE = ("judge_model", "VARCHAR", "The judge whose scores these are: the run's primary judge (`runs.judge_model`), "
                                    "or the judge `bs.connect` was given.")
_PRIMARY = ("primary_judge", "BOOLEAN", "Whether that judge is the run's primary judge (always true here, but for "
                                        "`bs.connect` with another judge).")
_PRIMARY_PASS = ("primary_judge", "BOOLEAN", "Whether the pass's judge is the run's primary judge "
                                             "(`runs.judge_model`).")
_SHOWN_LOOKUPS = {"ci_low", "ci_high", "ci_method", "primary_judge"}  # view columns not read from the score rows


@dataclass(frozen=True)
class View:
    name: str
    grain: str
    doc: str
    columns: tuple[tuple[str, str, str], ...]  # name, DuckDB type, meaning


def _view(name: str) -> View:
    table = SCORE_TABLES[name]
    cols: list[tuple[str, str, str]] = []
    for c in table.columns:
        cols.append((c.name, _DUCK_TYPES[str(c.type)], c.doc))
        if name in EVERY_JUDGE and name != "pass_scores":
            continue  # stored with their judge and its mark
        if c.name == "run_id" and "judge_model" not in table.names:
            cols += [_JUDGE, _PRIMARY]
        elif c.name == "judge_model":
            cols.append(_PRIMARY_PASS if name == "pass_scores" else _PRIMARY)
        if c.name == _CI_AFTER.get(name):
            cols += _CI[name]
    return View(name, table.grain, table.doc + (" Intervals: see `run_intervals`." if name in _CI else ""),
                tuple(cols))


DERIVED: tuple[View, ...] = tuple(_view(n) for n in SCORE_TABLES)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duck_type(table: str, column: str) -> str:
    return _DUCK_TYPES[str(STORED[table].schema.field(column).type)]


def columns(table: str) -> list[str]:
    return [c for c in STORED[table].names if c not in HIDDEN.get(table, ())]


def _name(table: str) -> str:
    """The view of a stored table: its own name, or ``_bedside.stored_<name>`` for a score table (the derived view
    of that name shows it with the computed rows)."""
    return f"{INTERNAL}.stored_{table}" if table in SCORE_TABLES else f'"{table}"'


def base_view(table: str, files: list[str], relation: str | None = None) -> str:
    """CREATE VIEW of a stored table over exactly these (absolute) Parquet files, with the schema's
    columns and types; no files: an empty view of the same columns. ``relation``: over that registered
    relation instead (an object store's Arrow dataset of the visible files, read with no DuckDB extension)."""
    cols = ", ".join(f'COALESCE(CAST("{c}" AS {duck_type(table, c)}), {FILLED[c]}) AS "{c}"' if c in FILLED
                     else f'CAST("{c}" AS {duck_type(table, c)}) AS "{c}"' for c in columns(table))
    if relation is not None:
        return f'CREATE OR REPLACE VIEW {_name(table)} AS SELECT {cols} FROM "{relation}"'
    if files:
        source = f"read_parquet([{', '.join(_literal(f) for f in files)}], union_by_name = true)"
        filled = [c for c in columns(table) if c in FILLED]
        if filled:  # files written before these columns existed hold their old value (an empty side names them)
            names = ", ".join(f'CAST(NULL AS {duck_type(table, c)}) AS "{c}"' for c in filled)
            source = f"(SELECT * FROM {source} UNION ALL BY NAME SELECT {names} WHERE false)"
        return f'CREATE OR REPLACE VIEW {_name(table)} AS SELECT {cols} FROM {source}'
    nulls = ", ".join(f'CAST(NULL AS {duck_type(table, c)}) AS "{c}"' for c in columns(table))
    return f'CREATE OR REPLACE VIEW {_name(table)} AS SELECT {nulls} WHERE false'


INTERVALS = (
    "CREATE TABLE IF NOT EXISTS run_intervals (run_id VARCHAR, benchmark VARCHAR, ci_low DOUBLE, ci_high DOUBLE,"
    " ci_method VARCHAR, run_updated_at VARCHAR, store_version BIGINT)"
)


def _computed_table(table: str) -> str:
    cols = ", ".join(f'"{c}" {duck_type(table, c)}' for c in columns(table))
    return f"CREATE TABLE IF NOT EXISTS {INTERNAL}.computed_{table} ({cols})"


def derived_view(view: View, options: SummaryOptions = SummaryOptions()) -> str:
    """The derived view: the stored rows of the runs that have them and the computed ones (all of them for a
    selection other than the stored one, but for pass scores, which hold every judge and pass)."""
    if options.order not in ("auto", "reference", "dataset"):
        raise ValueError(f"order: {options.order!r} is not auto, reference or dataset")
    table = view.name
    cols = ", ".join(f'"{c}"' for c in columns(table))
    computed = f"SELECT {cols} FROM {INTERNAL}.computed_{table}"
    if table in EVERY_JUDGE or options.is_stored:
        # a later score table: runs whose scores were stored before it existed have theirs computed
        stored = _name(table if table in LATER_SCORES else "run_summary")
        computed = (f"SELECT {cols} FROM {_name(table)} UNION ALL {computed}"
                    f" WHERE run_id NOT IN (SELECT run_id FROM {stored})")
    if table in EVERY_JUDGE and table != "pass_scores":
        return f'CREATE OR REPLACE VIEW "{table}" AS {computed}'
    judge = "r.judge_model" if options.selection.judge is None else _literal(options.selection.judge)
    of_row = "s.judge_model" if table == "pass_scores" else judge
    lookups = {"judge_model": judge, "primary_judge": f"{of_row} IS NOT DISTINCT FROM r.judge_model",
               "ci_low": "i.ci_low", "ci_high": "i.ci_high", "ci_method": "i.ci_method"}
    shown = ", ".join(f'{lookups[n]} AS "{n}"' if n in _SHOWN_LOOKUPS or n not in columns(table) else f's."{n}"'
                      for n, _, _ in view.columns)
    joined = f"FROM s JOIN runs r ON r.run_id = s.run_id"
    if table in _CI:
        match = "i.benchmark = s.benchmark" if table == "benchmark_scores" else "i.benchmark IS NULL"
        joined += (f" LEFT JOIN run_intervals i ON i.run_id = s.run_id AND {match}"
                   f" AND i.run_updated_at IS NOT DISTINCT FROM r.updated_at")
    return f'CREATE OR REPLACE VIEW "{table}" AS WITH s AS ({computed}) SELECT {shown} {joined}'


def _options_table(options: SummaryOptions) -> list[str]:
    selection = options.selection
    passes = "NULL" if selection.passes is None else _literal(json.dumps(list(selection.passes)))
    judge = "NULL" if selection.judge is None else _literal(selection.judge)
    return [f'CREATE OR REPLACE TABLE {INTERNAL}.options (judge VARCHAR, passes VARCHAR, "order" VARCHAR)',
            f"INSERT INTO {INTERNAL}.options VALUES ({judge}, {passes}, {_literal(options.order)})"]


def read_options(con) -> SummaryOptions:
    """The selection a connection or database file was built for (``_bedside.options``)."""
    judge, passes, order = con.execute(f'SELECT judge, passes, "order" FROM {INTERNAL}.options').fetchone()
    return SummaryOptions(order=order, selection=JudgeSelection(judge, None if passes is None else
                                                                tuple(json.loads(passes))))


def statements(files: dict[str, list[str]], options: SummaryOptions = SummaryOptions(),
               relations: dict[str, str] | None = None) -> list[str]:
    """Everything a connection or a database file needs, in order: the internal schema, base views, the
    intervals table and the computed score tables (created empty if missing), the selection, derived views.
    ``relations``: table -> a registered relation its base view reads instead of files (``base_view``)."""
    relations = relations or {}
    return [f"CREATE SCHEMA IF NOT EXISTS {INTERNAL}",
            *(base_view(t, files.get(t, []), relations.get(t)) for t in STORED), INTERVALS,
            *(_computed_table(t) for t in SCORE_TABLES), *_options_table(options),
            *(derived_view(v, options) for v in DERIVED)]


def dictionary() -> str:
    """The derived views' data dictionary (Markdown), for ``schemas/tables.md``."""
    out = ["## Derived views", "",
           "The scores are data too: every commit that writes a run's rows also writes, in that same commit, the",
           "run's score tables below, computed by the toolkit's own scoring (`toolkit/score_tables.py`), as Delta",
           "tables `<store>/<name>/` partitioned by run like the run tables (rows of the run's latest commit only).",
           "`bedside sql`, `bs.connect(store)` and the database file of `bedside db` show them as views of these names",
           "(no arithmetic in SQL: the numbers are the toolkit's), adding the bootstrap intervals of `run_intervals`.",
           "Their settings: each run's primary judge, all its passes, and the `auto` order (the reference order, with",
           "the scores the source file reported, for imported runs; dataset order, recomputed, for collected ones).",
           "`bs.connect` takes other settings: then the toolkit computes those rows when it connects, as it does for",
           "runs written before scores were stored (no step needed: their next commit stores them).", "",
           "Whose scores: every view names the judge its rows are for (`judge_model`) and marks the run's primary",
           "judge (`primary_judge`). `pass_scores` holds every judge and pass; `sample_scores`, `case_scores`,",
           "`benchmark_scores`, `reliability_scores` and `run_summary` one judge a run, the primary (so",
           "`run_summary` stays one row per run, the leaderboard); `benchmark_scores_by_judge` and",
           "`run_summary_by_judge` every judge with a scored reply, each computed by the toolkit as the primary",
           "judge's are (no intervals there: `bedside summary --judge J` gives another judge's).", ""]
    for v in DERIVED:
        out += [f"### `{v.name}`", "", v.doc, "", f"One row per {v.grain}.", "",
                "| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{n}` | {t} | {d} |" for n, t, d in v.columns]
        out.append("")
    out += ["### `run_intervals`", "",
            "A table, not a view: bootstrap 95% intervals cannot be computed in SQL, so `bedside db` (and",
            "`bs.connect` when a query names `benchmark_scores` or `run_summary`) computes them with",
            "`toolkit.summary` and stores them here, one row per run x benchmark (`benchmark` null: the overall",
            "macro mean), with their method (`ci_method`: the reference runner's percentile bootstrap and its",
            "resamples), the run's `updated_at` and the store version they were computed at. The views",
            "show an interval only while the run's `updated_at` is unchanged; a run written since shows null",
            "intervals until `bedside db --out FILE` runs again.", "",
            "### `bedside_info`", "",
            "Database files only (`bedside db`): one row naming what the file mirrors. `format` (`bedside-db 2`),",
            "`store_path` (absolute), `store_version` (the store version its views read; rewritten by every",
            "refresh), `written_at`, `refreshed_at`, `intervals_store_version` (the version `run_intervals` was",
            "computed at) and `bedside_version`. The file names the store's Parquet files by absolute path: after",
            "moving the store, or when a refresh was missed (the file was held open for writing) and a vacuum has",
            "since removed files it names, run `bedside db --out FILE` again.", ""]
    return "\n".join(out)


def relation_names() -> dict[str, list[str]]:
    """What a query can name, by kind, from the definitions above (``bedside sql --help`` lists them)."""
    return {"tables": [t for t in STORED if t not in SCORE_TABLES], "score views": [v.name for v in DERIVED],
            "and": ["run_intervals"]}
