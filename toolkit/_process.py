"""What a ``bedside`` process does beyond plain imports to start fast, fenced here.

A measure stays only while it buys at least 10 % of a cold command users run, measured against the plain
way by tests/perf/process_measures.py (one ROW each); no other module touches ``sys.modules``, ctypes or
a private API (tests/test_process_fence.py). Nothing from toolkit is imported here: every layer may use it.
"""

from __future__ import annotations

import sys
from typing import Any


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
