"""The connection ``bs.connect(store)`` hands out: DuckDB's own, with every way of writing a file refused.

A locked DuckDB connection (``enable_external_access=false``) reaches only the files in ``allowed_paths``,
the store's current Parquet files, and DuckDB lets it write those as well as read them:
``COPY ... TO '<part file>' (USE_TMP_FILE false)`` would overwrite a committed file. DuckDB has no
read-only list, so this wrapper parses every SQL text it or its relations are given and refuses COPY,
EXPORT and ATTACH (and EXPLAIN ANALYZE of them, which runs them), and refuses a relation's writes to files
(``to_parquet``, ``to_csv``, ...). Everything else is the wrapped connection's, unchanged.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import duckdb

WRITES_FILES = frozenset({duckdb.StatementType.COPY, duckdb.StatementType.COPY_DATABASE,
                          duckdb.StatementType.EXPORT, duckdb.StatementType.ATTACH})
EXPLAIN_HEAD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*explain\s*(?:\([^)]*\)\s*)?(?:analy[sz]e\b)?",
                          re.I | re.S)
_FILE_WRITES = frozenset({"to_parquet", "write_parquet", "to_csv", "write_csv"})
_SQL_METHODS = frozenset({"sql", "query", "execute", "executemany", "from_query"})
_PARSER = duckdb.connect(":memory:")  # parses only (extract_statements reads no catalog); one, shared: a
_PARSER_GUARD = threading.Lock()      # connection is costly to open


class ReadOnlyRefused(duckdb.PermissionException):
    """A statement that would write a file, on a connection that only reads the store."""


def parsed(sql: str) -> list:
    """The statements of a SQL text (duckdb.ParserException when it does not parse)."""
    with _PARSER_GUARD:
        return _PARSER.extract_statements(sql)


def explained(statement: Any) -> list:
    """The statements an EXPLAIN statement explains (EXPLAIN ANALYZE runs them)."""
    head = EXPLAIN_HEAD.match(statement.query)
    return parsed(statement.query[head.end():]) if head else []


def check(sql: Any) -> None:
    """ReadOnlyRefused when ``sql`` (text or a parsed statement) holds a statement that writes a file."""
    statements = [sql] if isinstance(sql, duckdb.Statement) else parsed(str(sql))
    for statement in statements:
        inner = explained(statement) if statement.type == duckdb.StatementType.EXPLAIN else []
        for s in (statement, *inner):
            if s.type in WRITES_FILES:
                word = str(s.type).rsplit(".", 1)[-1].replace("_DATABASE", " FROM DATABASE")
                raise ReadOnlyRefused(f"{word} is refused on this read-only connection: it could overwrite the "
                                      "store's files (bs.connect(store, read_only=False) writes files of your own)")


def _unwrapped(value: Any) -> Any:
    return value._inner if isinstance(value, (LockedConnection, LockedRelation)) else value


def _wrapped(value: Any) -> Any:
    if isinstance(value, duckdb.DuckDBPyConnection):
        return LockedConnection(value)
    if isinstance(value, duckdb.DuckDBPyRelation):
        return LockedRelation(value)
    return value


def _call(method: Any, args: tuple, kwargs: dict) -> Any:
    return _wrapped(method(*map(_unwrapped, args), **{k: _unwrapped(v) for k, v in kwargs.items()}))


class _Locked:
    """Delegates to ``_inner``; what comes back as a connection or relation is locked too."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        if name in _FILE_WRITES:
            def refused(*args: Any, **kwargs: Any) -> Any:
                raise ReadOnlyRefused(f"{name} is refused on this read-only connection: it could overwrite the "
                                      "store's files (use .pl() and write the frame, or "
                                      "bs.connect(store, read_only=False))")
            return refused
        return lambda *args, **kwargs: self._guarded(name, value, args, kwargs)

    def _guarded(self, name: str, method: Any, args: tuple, kwargs: dict) -> Any:
        return _call(method, args, kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def __dir__(self) -> list[str]:
        return dir(self._inner)

    def __repr__(self) -> str:
        return repr(self._inner)

    def __str__(self) -> str:
        return str(self._inner)

    def __eq__(self, other: object) -> bool:
        return self._inner == _unwrapped(other)

    def __hash__(self) -> int:
        return hash(self._inner)


class LockedConnection(_Locked):
    """A DuckDB connection whose SQL is checked first (``check``); see the module's doc."""

    __slots__ = ()

    def _guarded(self, name: str, method: Any, args: tuple, kwargs: dict) -> Any:
        if name in _SQL_METHODS:
            check(args[0] if args else kwargs.get("query", ""))
        return _call(method, args, kwargs)

    def __enter__(self) -> LockedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


class LockedRelation(_Locked):
    """A relation of a locked connection: its SQL (``query``) is checked, its file writes refused."""

    __slots__ = ()

    def _guarded(self, name: str, method: Any, args: tuple, kwargs: dict) -> Any:
        if name == "query":
            check(args[1] if len(args) > 1 else kwargs.get("sql_query", ""))
        return _call(method, args, kwargs)

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, key: Any) -> Any:
        return _wrapped(self._inner[key])

    def __contains__(self, key: object) -> bool:
        return key in self._inner

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._inner.__arrow_c_stream__(requested_schema)
