"""The store: the tables of ``toolkit.tables`` kept as Delta Lake tables, written in atomic commits.

Public interface: ``Store`` (open, read, begin/commit_run: a write transaction, lock, version, subscribe,
batch, ...), whole-run operations in ``toolkit.store.runs_ops`` (delete_run, rename_run, compact_run),
``StoreError``, ``safe_segment``, ``default_store_path``. Nothing outside this package knows where files
lie.
"""

from __future__ import annotations

from toolkit.store.core import Store
from toolkit.store.paths import StoreError, default_store_path, safe_segment

__all__ = ["Store", "StoreError", "default_store_path", "safe_segment"]
