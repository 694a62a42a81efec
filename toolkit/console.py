"""The process entry of the ``bedside`` script and of ``python -m toolkit``.

Importing the command line (click, then the command's modules) takes a good part of a second;
a Ctrl-C in that time was a Python traceback (or, inside click's import, a RuntimeError and exit 1).
Here it is the one line a Ctrl-C gives later, with exit 130. Nothing heavy is imported here.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130


def _interrupted(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt caused this (Python wraps one raised inside ``__set_name__`` and the like)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def run() -> int:
    try:
        from toolkit.cli import entry
    except BaseException as error:  # noqa: BLE001 - only an interrupted import is answered here
        if not _interrupted(error):
            raise
        if sys.stderr is not None:
            sys.stderr.write("bedside: interrupted\n")
        return INTERRUPTED
    return entry()
