"""The store's one error type (apart from its full-disk kind, ``disk.NoSpace``)."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A store operation that cannot proceed (missing run, run exists, locked run, damaged file, ...)."""
