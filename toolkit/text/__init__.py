"""Text that leaves the toolkit: for terminals (control characters made visible) and for spreadsheets
(CSV whose formula-like cells are neutralised). Names are imported on first use (CSV needs polars)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, str] = {
    "visible": "toolkit.text._terminal",
    "visible_json": "toolkit.text._terminal",
    "write_csv": "toolkit.text._spreadsheet",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit.text' has no attribute {name!r}")
    return getattr(import_module(module), name)
