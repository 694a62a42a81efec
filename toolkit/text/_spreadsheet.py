"""CSV for spreadsheets: every CSV the toolkit writes goes through ``write_csv`` here.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some, after a leading
TAB or CR) as a formula, so a run id or model name such as ``=HYPERLINK(...)`` would run on the
reader's machine. The OWASP rule: such a text cell gets a single quote ``'`` in front. Only text
columns (and the header) are touched; numbers stay numbers, so a negative delta stays ``-0.308``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PATTERN = "^[=+\\-@\t\r]"


def neutralised(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every text cell (and column name) that a spreadsheet would read as a formula
    prefixed with ``'``; other cells and columns unchanged."""
    import polars as pl  # here: the terminal half of toolkit.text is imported by commands that need no polars

    text = [name for name, dtype in frame.schema.items() if isinstance(dtype, (pl.String, pl.Categorical, pl.Enum))]
    out = frame.with_columns(
        pl.when(pl.col(name).cast(pl.String).str.contains(_PATTERN))
        .then(pl.lit("'") + pl.col(name).cast(pl.String))
        .otherwise(pl.col(name).cast(pl.String)).alias(name)
        for name in text)
    renamed = {name: f"'{name}" for name in out.columns if name.startswith(FORMULA_START)}
    return out.rename(renamed) if renamed else out


def write_csv(frame: pl.DataFrame, path: str | os.PathLike[str] | None = None, *, raw: bool = False,
              **options) -> str | None:
    """``frame.write_csv(path, **options)`` with formula-like text cells neutralised (``raw``: as stored,
    for programs rather than spreadsheets). Returns the text when ``path`` is None."""
    return (frame if raw else neutralised(frame)).write_csv(path, **options)
