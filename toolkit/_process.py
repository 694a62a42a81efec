"""What a ``bedside`` process does beyond plain imports to start fast, fenced here.

A measure stays only while it buys at least 10 % of a cold command users run, measured against the plain
way by tests/perf/process_measures.py (one ROW each); no other module touches ``sys.modules``, ctypes or
a private API (tests/test_process_fence.py). Nothing from toolkit is imported here: every layer may use it.
"""

from __future__ import annotations

import sys
from typing import Any


def student_t() -> Any:
    """scipy's Student t ufuncs (``stdtr``, ``stdtrit``) as attributes of one object. They live in the
    compiled ``scipy.special._ufuncs``; ``import scipy.special`` first runs the package's array-API layer
    (numpy's f2py, testing, ...), a large part of a cold ``bedside compare``. The compiled module is loaded
    under a bare, not yet run package instead: the same objects the full import exports, so the numbers
    are scipy's. Any surprise (another scipy layout): the plain import."""
    import types

    if "scipy.special" not in sys.modules:
        import importlib
        import importlib.util

        try:
            import scipy  # noqa: F401  (the parent package, run as usual)

            spec = importlib.util.find_spec("scipy.special")
            sys.modules["scipy.special"] = importlib.util.module_from_spec(spec)
            try:
                ufuncs = importlib.import_module("scipy.special._ufuncs")
            finally:
                del sys.modules["scipy.special"]  # the real package runs on the next import of it
            return types.SimpleNamespace(stdtr=ufuncs.stdtr, stdtrit=ufuncs.stdtrit)
        except Exception:  # noqa: BLE001
            for name in [m for m in sys.modules if m.startswith("scipy.special")]:
                del sys.modules[name]
    from scipy import special

    return types.SimpleNamespace(stdtr=special.stdtr, stdtrit=special.stdtrit)


def no_collection_at_exit() -> None:
    """Spare the interpreter's shutdown its garbage collections: every object alive now is frozen
    (``gc.freeze``), and the collections that finalisation runs over the imported libraries' millions of
    objects skip them. Called once the command has finished and its output is flushed; atexit handlers still
    run, and only the objects of reference cycles are then left for the process's end to reclaim."""
    import gc

    gc.freeze()
