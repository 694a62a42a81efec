"""A cold ``bedside run`` pays only for what it uses: no pandas on any path of a run, an import or a write.

pyarrow imports pandas (most of a second) whenever it converts Python values itself; the store builds its
Arrow tables through polars instead (``toolkit.tables``), and those tables must be exactly the ones pyarrow
built: the same schema, metadata and Parquet bytes.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_cli_process import bedside_process
from toolkit.sim import SimConfig, SimServer
from toolkit.tables import FILLED, STORED, constant, empty, polars_schema, to_arrow

# Printed at exit by the command's process: which heavy modules it loaded.
LOADED = ("import atexit\natexit.register(lambda: print('LOADED', json.dumps(sorted(m for m in ('pandas', 'duckdb') "
          "if m in sys.modules)), file=sys.stderr))\nimport json")


def _loaded(done) -> list[str]:
    line = [x for x in done.stderr.splitlines() if x.startswith("LOADED ")]
    assert line, done.stderr
    return json.loads(line[-1][len("LOADED "):])


def test_a_cold_run_and_its_resume_never_import_pandas(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with SimServer(SimConfig()) as sim:
        args = ["run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
                "--limit", "6", "--store", str(store), "--progress", "none"]
        first = bedside_process(args, prelude=LOADED)
        assert first.returncode == 0, first.stderr
        assert _loaded(first) == []
        more = bedside_process([*args, "--answer-samples", "2"], prelude=LOADED)  # a resume that adds samples
        assert more.returncode == 0, more.stderr
        assert _loaded(more) == []
    renamed = bedside_process(["runs", "rename", "sim/strong", "renamed", "--store", str(store)], prelude=LOADED)
    assert renamed.returncode == 0, renamed.stderr
    assert _loaded(renamed) == []
    out = tmp_path / "export.jsonl"
    exported = bedside_process(["export", "--run", "renamed", "--out", str(out), "--store", str(store)])
    assert exported.returncode == 0, exported.stderr
    files = [str(tmp_path / f"export.sample{k}.jsonl") for k in (0, 1)]  # a multi-sample run: a file per sample
    imported = bedside_process(["import", *files, "--run-id", "again", "--as-samples", "--store", str(store)],
                               prelude=LOADED)
    assert imported.returncode == 0, imported.stderr
    assert _loaded(imported) == []


def _value(field: pa.Field, i: int):
    if field.nullable and i % 5 == 4:
        return None
    return {pa.string(): ["", "x", "ünï €", "a" * 70][i % 4], pa.int32(): i * 37 - 5, pa.int64(): i * 10 ** 11,
            pa.float64(): [0.5, 1, math.nan, -0.0, 1e300][i % 5], pa.bool_(): i % 2 == 0}[field.type]


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(STORED))
def test_tables_built_through_polars_are_those_pyarrow_built(name: str) -> None:
    schema = STORED[name].schema
    rows = [{f.name: _value(f, i + j) for j, f in enumerate(schema) if not f.nullable or (i + j) % 7} for i in range(40)]
    old_rows = [{**r, **{c: v for c, v in FILLED.items() if c in schema.names and r.get(c) is None}} for r in rows]
    want = pa.Table.from_pylist(old_rows, schema=schema)
    got = to_arrow(name, rows)
    assert got.schema.equals(schema, check_metadata=True)
    assert _parquet(got) == _parquet(want)
    columns = {c: [r.get(c) for r in old_rows] for c in schema.names}
    assert _parquet(to_arrow(name, columns)) == _parquet(want)
    assert to_arrow(name, []).equals(schema.empty_table(), check_metadata=True)
    assert empty(name).equals(schema.empty_table(), check_metadata=True)
    assert dict(polars_schema(name)) == dict(__import__("polars").from_arrow(schema.empty_table()).schema)


def test_values_polars_refuses_are_converted_or_refused_as_pyarrow_does() -> None:
    # A float in an integer column: pyarrow's own conversion (it truncates); a string there: refused.
    row = {"run_id": "r", "case_id": "c", "attempt": 2.0, "seq": 1}
    assert _parquet(to_arrow("answers", [row])) == _parquet(pa.Table.from_pylist([{**row, "sample": 0}],
                                                                                STORED["answers"].schema))
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        to_arrow("answers", [{**row, "attempt": "two"}])
    with pytest.raises(UnicodeEncodeError):
        to_arrow("answers", [{**row, "answer": "lone \ud800"}])


def test_constant_columns() -> None:
    assert constant("x", 3, pa.string()).equals(pa.array(["x"] * 3, pa.string()))
    assert constant(0, 2, pa.int32()).equals(pa.array([0, 0], pa.int32()))
    assert len(constant("x", 0, pa.string())) == 0
