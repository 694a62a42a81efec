"""The physical layout of the store's tables: the columns each Delta table holds besides the schema's
(see ``toolkit.store.delta``), and which tables are a run's data."""

from __future__ import annotations

import pyarrow as pa

from toolkit.tables import SCORE_TABLES, STORED

DATA_TABLES = ("answers", "judgments", "decisions")
SCORES = tuple(SCORE_TABLES)  # a run's scores: rows of its one scores write (``live.scores_write``)
RUN_DATA = (*DATA_TABLES, *SCORES)
PART = "part"
WRITE_ID = "write_id"


def physical_schema(table: str) -> pa.Schema:
    fields = [pa.field(f.name, f.type, nullable=True) for f in STORED[table].schema]
    if table in RUN_DATA:
        fields.append(pa.field(WRITE_ID, pa.string()))
    fields.append(pa.field(PART, pa.string()))
    return pa.schema(fields)


def empty(table: str, columns: list[str] | None = None) -> pa.Table:
    """No rows of the table (``Schema.empty_table`` would import pandas, half a second of a cold start)."""
    schema = physical_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    return pa.Table.from_batches([], schema)
