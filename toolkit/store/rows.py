"""A write's rows as the store's Delta tables take them: Arrow tables of each run table's schema (checked
before any commit), tagged with their write id and partition."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from toolkit.store.delta import PART, RUN_DATA, WRITE_ID
from toolkit.store.paths import StoreError, normal_run_id
from toolkit.tables import FILLED, STORED, constant, to_arrow

Rows = dict[str, "pa.Table | list[dict]"]  # run table -> its rows


def tagged(parts: list[tuple[pa.Table, str, str]]) -> pa.Table:
    """Runs' rows of one table, each run's with its write id and part: one column each for all runs (a
    column per run costs a conversion per run)."""
    data = pa.concat_tables([frame for frame, _, _ in parts])
    for name, at in ((WRITE_ID, 1), (PART, 2)):
        values = [v for part in parts for v in [part[at]] * part[0].num_rows]
        column = pl.Series(name, values, dtype=pl.String).to_arrow(compat_level=pl.CompatLevel.oldest())
        data = data.append_column(name, column.cast(pa.string()))
    return data


def _filled(table: str, frame: pa.Table) -> pa.Table:
    """``frame`` with the table's ``FILLED`` columns it leaves out, or leaves null, at their old value (rows of
    writers that know nothing of answer samples are sample 0)."""
    import pyarrow.compute  # noqa: F401  (a write path)

    for name, value in FILLED.items():
        if name not in STORED[table].names:
            continue
        kind = STORED[table].schema.field(name).type
        if name not in frame.column_names:
            frame = frame.append_column(name, constant(value, frame.num_rows, kind))
        elif frame.column(name).null_count:
            frame = frame.set_column(frame.schema.get_field_index(name), name,
                                     pa.compute.coalesce(frame.column(name).cast(kind),
                                                         constant(value, frame.num_rows, kind)))
    return frame


def frames(run_id: str, rows: Rows) -> dict[str, pa.Table]:
    """The run tables' rows as Arrow tables of their schemas; StoreError (one line) for a value that does not
    fit (a number where text belongs, a lone surrogate, ...), before any commit."""
    out = {}
    for table, data in rows.items():
        if table not in RUN_DATA:
            raise StoreError(f"{table} is not a run data table")
        try:
            frame = _filled(table, data if isinstance(data, pa.Table) else to_arrow(table, data))
            frame = frame.select(STORED[table].schema.names).cast(STORED[table].schema)
            given = frame.column("run_id").unique().to_pylist()
            if given and given != [run_id] and {normal_run_id(g) for g in given} == {normal_run_id(run_id)}:
                frame = frame.set_column(frame.schema.get_field_index("run_id"), "run_id",
                                         constant(run_id, frame.num_rows, pa.string()))  # one spelling
            elif frame.num_rows and given != [run_id]:
                raise StoreError(f"{table} rows for run {run_id!r} name another run")
            import pyarrow.compute  # noqa: F401  (a write path: read commands never import it)

            pa.compute.utf8_length(frame.column("run_id"))  # validates the text columns' UTF-8 below too
            frame.validate(full=True)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as error:
            raise StoreError(f"run {run_id!r}: {table}: cannot store a value: {str(error).splitlines()[0][:200]}") from None
        if frame.num_rows:
            out[table] = frame
    return out
