"""Every stored table's live Parquet files read the same in pyarrow, polars, DuckDB and pandas: same rows, same
values, standard types only (no large/view strings, timestamps or extension types that one of them mangles)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import reference_model as rm
from toolkit.store import Store
from toolkit.tables import TABLES

_STANDARD = {pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()}


@pytest.fixture(scope="module")
def imported(tmp_path_factory, sample_dataset) -> Path:
    from toolkit.reference._read import import_reference

    root = tmp_path_factory.mktemp("imported")
    path = root / "r.jsonl"
    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=9, error_rate=0.2)
    rows[0]["answer"] = "ünïcödé \u2028 and an emoji \U0001F600"  # text that only UTF-8 holds
    rm.write_rows(path, rows)
    store = Store.open(root / "st")
    import_reference(store, path, sample_dataset, "imported/run 'one'")
    return store.root


def _plain(value):
    """One value as every engine can agree on it: NaN and pandas' missing values are None, numbers floats."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        value = value.item() if hasattr(value, "item") else value
        return value if isinstance(value, (bool, str)) else float(value)
    return value


def _rows(columns: list[str], records) -> list[tuple]:
    return sorted((tuple(_plain(r[c]) for c in columns) for r in records), key=json.dumps)


@pytest.mark.parametrize("which", ["demo", "imported"])
def test_every_table_reads_the_same_in_four_engines(which: str, demo_store: Path, imported: Path) -> None:
    store = Store.open(demo_store if which == "demo" else imported)
    for table in TABLES:
        files = [str(f) for f in store.files(table)]
        assert files, table
        schemas = [pq.read_schema(f) for f in files]
        for schema in schemas:  # what the Delta writer put in the files
            assert set(schema.types) <= _STANDARD, (table, schema)
            assert all(schema.field(c.name).type == c.type for c in TABLES[table].columns), table
        columns = schemas[0].names
        arrow = pa.concat_tables(pq.read_table(f) for f in files).select(columns)
        frame = pl.read_parquet(files, hive_partitioning=False).select(columns)
        duck = duckdb.connect().execute(
            f"SELECT {', '.join(chr(34) + c + chr(34) for c in columns)} FROM read_parquet(?)", [files])
        duck_rows = [dict(zip(columns, r)) for r in duck.fetchall()]
        pandas = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)[columns]
        want = _rows(columns, arrow.to_pylist())
        assert len(want) == arrow.num_rows > 0
        assert _rows(columns, frame.to_dicts()) == want, table
        assert _rows(columns, duck_rows) == want, table
        assert _rows(columns, pandas.to_dict("records")) == want, table
        # the store's own reader agrees too (the live rows, schema columns)
        stored = store.read(table)
        assert _rows(stored.columns, stored.to_dicts()) == _rows(stored.columns, arrow.select(stored.columns).to_pylist())


def test_duckdb_types_equal_the_schema(imported: Path) -> None:
    from toolkit.sql import _views as views

    store = Store.open(imported)
    for table in TABLES:
        files = [str(f) for f in store.files(table)]
        got = dict((r[0], r[1]) for r in duckdb.connect().execute(
            "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall())
        assert {c: got[c] for c in TABLES[table].names} == {c: views.duck_type(table, c) for c in TABLES[table].names}
