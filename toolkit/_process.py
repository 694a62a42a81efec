"""The few things a cold ``bedside`` process does beyond plain imports, fenced here.

Each stays only while it buys at least 10 % of a cold command users run, measured against the plain way
by tests/perf/process_measures.py (one ROW each); no other module touches ``sys.modules``, ctypes or a
private API (tests/test_process_fence.py). Nothing from toolkit is imported here: every layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any


def one_blas_thread() -> None:
    """Have numpy's OpenBLAS compute on the calling thread only. Its default, a thread per core, spins
    against the other processes of a busy machine on the commands' small matrix products (runs x cases
    by cases x resamples); the numbers are the same either way (its threads split the output, not the
    sums). Call before numpy is imported; the user's own setting wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def student_t_ufuncs() -> types.SimpleNamespace:
    """scipy's Student t ufuncs ``stdtr`` and ``stdtrit``, without running ``scipy.special``'s ``__init__``,
    whose array-API layer imports numpy's f2py and testing packages, most of a cold ``compare``'s
    scipy cost. They live in the compiled ``scipy.special._ufuncs``, loaded under a bare package: the
    same objects a later ``import scipy.special`` exports, so the numbers are scipy's. Any surprise
    (another scipy layout): the plain import."""
    if "scipy.special" not in sys.modules:
        try:
            import scipy  # noqa: F401  (the parent package, run as usual)

            spec = importlib.util.find_spec("scipy.special")
            sys.modules["scipy.special"] = importlib.util.module_from_spec(spec)  # a package not yet run
            try:
                ufuncs = importlib.import_module("scipy.special._ufuncs")
            finally:
                del sys.modules["scipy.special"]  # the real package is run by the next import of it
            return types.SimpleNamespace(stdtr=ufuncs.stdtr, stdtrit=ufuncs.stdtrit)
        except Exception:  # noqa: BLE001  (another scipy layout: the plain import below)
            for name in [m for m in sys.modules if m.startswith("scipy.special")]:
                del sys.modules[name]
    from scipy import special

    return types.SimpleNamespace(stdtr=special.stdtr, stdtrit=special.stdtrit)


def import_jsonschema() -> Any:
    """The ``jsonschema`` module, imported without ``rfc3987_syntax``. jsonschema's optional "iri" format
    check imports that module when present (jupyterlab's dependencies bring it), and it builds a parser
    grammar on import, most of a cold dataset-loading command; formats are never checked here (no
    format_checker). It is hidden during this one import only: the process can import it afterwards."""
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        import jsonschema

        return jsonschema
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import jsonschema
    finally:
        del sys.modules["rfc3987_syntax"]
    return jsonschema
