"""``bedside db``: write a DuckDB database file of views over the store (``toolkit.sql._database``)."""

from __future__ import annotations

import click

from toolkit.cli.common import CommandError, open_store
from toolkit.cli.options import store_option


@click.command("db")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="The database file to write, e.g. results.duckdb (an existing one is rebuilt in place, "
                   "atomically, if `bedside db` wrote it; any other file is refused).")
@store_option
def db_cmd(out: str, store_dir: str | None) -> None:
    """Write a DuckDB database file whose views read the store: tables and derived views, for duckdb, DBeaver or a BI tool.

    No data is copied: the views read the store's current Parquet files, and every later store write
    refreshes them (or run this again). Open it with `duckdb -readonly FILE` (any DuckDB >= 1.3, no extension;
    read-only, a store write can refresh it while you look)."""
    from toolkit.sql import write_database

    store = open_store(store_dir)
    if not store.root.is_dir():
        raise CommandError([f"{store.root}: no store here (give --store DIR or set BEDSIDE_STORE)"])
    info = write_database(store, out)
    version = "empty store" if info.store_version is None else f"store version {info.store_version}"
    from toolkit.sql import relation_names

    views = ", ".join([*relation_names()["tables"], *relation_names()["score views"]])
    click.echo(f"wrote {info.path}: {info.runs} runs, {version}; views: {views}; "
               "tables: run_intervals, bedside_info")
    if store.is_remote:  # its writers are other machines: the file is a snapshot
        click.echo(f"open it: duckdb -readonly {info.path}   (with httpfs and an S3 secret; a snapshot of this store "
                   "version: rerun to follow the store)")
        return
    click.echo(f"open it: duckdb -readonly {info.path}   (kept current by every store write; rerun to recompute "
               "intervals)")
