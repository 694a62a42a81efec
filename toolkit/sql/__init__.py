"""SQL over the store: DuckDB views of every table and derived score, a locked read-only connection,
and ``bedside db`` files that follow the store's commits.

Names are imported on first use: importing this package (as every committing process does, to keep
registered ``db`` files current) does not import DuckDB.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, str] = {
    "connect": "toolkit.sql._query",
    "query": "toolkit.sql._query",
    "query_head": "toolkit.sql._query",
    "SQLRefused": "toolkit.sql._query",
    "write_database": "toolkit.sql._database",
    "dictionary": "toolkit.sql._views",
    "relation_names": "toolkit.sql._views",
}

__all__ = sorted([*_EXPORTS, "follow_commits"])


def follow_commits() -> None:
    """Keep the ``bedside db`` files registered in a store current after this process's commits to it
    (subscribes to the store's commit hook once; cheap: no DuckDB until a refresh is due)."""
    import_module("toolkit.sql._refresh")


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit.sql' has no attribute {name!r}")
    return getattr(import_module(module), name)
