"""Reading the store's Parquet files: a table's visible files as one polars frame, an Arrow dataset, and the
write ids a file holds. Local files through polars (a cold command's fast path), object-store files through
pyarrow's S3 file system (``toolkit.store.location``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
import polars as pl
import pyarrow as pa

from toolkit.store.layout import PART, RUN_DATA, WRITE_ID, empty, physical_schema
from toolkit.store import location
from toolkit.store.location import ObjectPath, filesystem
from toolkit.store.paths import StoreError
from toolkit.tables import DATASET_TABLES, FILLED, constant


_FILE_IDS: dict[str, tuple[str, str, int]] = {}  # data file -> (min, max write_id, rows): files never change


def file_write_ids(path: Path) -> tuple[str, str, int] | None:
    """(lowest and highest write id, rows) of a data file, read from the file itself: for an add action whose
    statistics were left out. None when the file cannot be read (then whoever reads it names it)."""
    key = str(path)
    if key not in _FILE_IDS:
        try:
            ids = (_read_remote([path], "answers", [WRITE_ID]) if isinstance(path, ObjectPath)
                   else pl.read_parquet(key, columns=[WRITE_ID], hive_partitioning=False))[WRITE_ID]
        except Exception:  # noqa: BLE001 - polars' errors have no common base
            return None
        if ids.null_count() or not len(ids):
            return None
        if len(_FILE_IDS) > 4096:
            _FILE_IDS.clear()
        _FILE_IDS[key] = (ids.min(), ids.max(), len(ids))
    return _FILE_IDS[key]


def polars_schema(table: str, columns: list[str]) -> pl.Schema:
    """The polars types of ``columns`` of the table's physical schema."""
    return pl.from_arrow(empty(table, columns)).schema


def read_files(files: list[Path], table: str, columns: list[str]) -> pl.DataFrame:
    """The given files' rows (``columns`` of the physical schema, its types), in file order; StoreError
    naming the first file that cannot be read.

    All files in one polars read (parallel, no Python per file, no Arrow casts: a cold command need not
    import pyarrow.compute, pyarrow.parquet and the ssl it loads; pyarrow.dataset would import pandas); files
    written before a FILLED column existed get it in a second polars pass. Should that fail, file by file with
    ``pyarrow.parquet``, which names a damaged file (or reads what polars refused)."""
    types = polars_schema(table, columns)
    if files and isinstance(files[0], ObjectPath):
        return _read_remote(files, table, columns)
    if files:
        names = [str(f) for f in files]
        try:
            frame = pl.read_parquet(names, columns=columns, hive_partitioning=False, glob=False,
                                    missing_columns="raise")
            return frame.cast(types)
        except Exception:  # noqa: BLE001 - polars' errors have no common base; the slow path explains
            pass
        filled = [c for c in columns if c in FILLED]
        if filled:  # files written before these columns existed
            try:
                rest = pl.read_parquet(names, columns=[c for c in columns if c not in FILLED],
                                       hive_partitioning=False, glob=False, missing_columns="raise")
                added = pl.scan_parquet(names, schema=pl.Schema({c: types[c] for c in filled}), hive_partitioning=False,
                                        glob=False, missing_columns="insert", extra_columns="ignore").collect()
                frame = pl.concat([rest, added], how="horizontal")
                return frame.select(columns).with_columns(
                    [pl.col(c).fill_null(pl.lit(FILLED[c], dtype=types[c])) for c in filled]).cast(types)
            except Exception:  # noqa: BLE001 - as above
                pass
    parts = [_read_one(f, table, columns) for f in files]
    return pl.from_arrow(pa.concat_tables(parts) if parts else empty(table, columns)).cast(types)


def _read_one(f: Path, table: str, columns: list[str]) -> pa.Table:
    """One file's ``columns`` (those written before a FILLED column existed get its old value); StoreError
    naming a file that cannot be read."""
    import pyarrow.parquet as pq

    schema = pa.schema([physical_schema(table).field(c) for c in columns])
    try:
        source = pq.ParquetFile(f.open_input_file() if isinstance(f, ObjectPath) else f)
        have = set(source.schema_arrow.names)
        part = source.read(columns=[c for c in columns if c in have or c not in FILLED])
        for c in columns:
            if c not in have and c in FILLED:
                part = part.append_column(c, constant(FILLED[c], part.num_rows, schema.field(c).type))
        return part.select(columns).cast(schema)
    except (OSError, pa.ArrowException) as error:
        raise StoreError(f"{f}: {_unreadable(error)}") from None


def _unreadable(error: BaseException) -> str:
    """Why a part file could not be read: not there, refused, a failure that may pass, or damaged."""
    if isinstance(error, FileNotFoundError):
        return ("part file not found: deleted since its commit (by a vacuum, when this store version is older "
                "than the vacuum's retention, or by hand)")
    if isinstance(error, OSError) and (location.denied(error) or location.transient(error)):
        return f"cannot read part file: {location.what_failed(error)}"
    return f"damaged part file: {str(error).splitlines()[0][:200]}"


def _read_remote(files: list[ObjectPath], table: str, columns: list[str]) -> pl.DataFrame:
    """``read_files`` of an object store's files: fetched a few at a time (each is a request's round trip)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        parts = list(pool.map(lambda f: _read_one(f, table, columns), files))
    return pl.from_arrow(pa.concat_tables(parts)).cast(polars_schema(table, columns))


def arrow_dataset(files: list[Path], table: str) -> Any:
    """A lazy pyarrow dataset of exactly these files (local, or an object store's through its file system),
    of the table's physical columns but the partition column (Delta keeps it in the path): for DuckDB, polars
    (``pl.scan_pyarrow_dataset``) or a notebook."""
    import pyarrow.dataset as ds

    schema = physical_schema(table)
    if table in RUN_DATA or table in DATASET_TABLES:  # a partition column: in the files' paths, not in them
        schema = schema.remove(schema.get_field_index(PART))
    if not files:
        return ds.dataset(empty(table).select(schema.names), schema=schema)
    if isinstance(files[0], ObjectPath):
        return ds.dataset([f.key for f in files], schema=schema, format="parquet", filesystem=filesystem())
    return ds.dataset([str(f) for f in files], schema=schema, format="parquet")
