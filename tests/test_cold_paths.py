"""Cold-command shortcuts (toolkit/_process.py) load what the plain path loads, and leave the process as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_loading_a_dataset_does_not_build_the_iri_grammar_and_leaves_it_importable(tmp_path) -> None:
    """jsonschema is imported without rfc3987_syntax (a grammar built on import, for a format check never
    used), and the module is not blocked for the rest of the process: a notebook can still import it. A
    stand-in of the module is put on the path, as jupyterlab's dependencies put the real one there."""
    (tmp_path / "rfc3987_syntax.py").write_text("def is_valid_syntax(rule, text):\n    return True\n")
    code = textwrap.dedent("""
        import sys
        import toolkit
        toolkit.load_dataset(None)
        assert "jsonschema" in sys.modules, "the dataset was not validated"
        assert "rfc3987_syntax" not in sys.modules, "the IRI grammar was imported, or left blocked"
        import rfc3987_syntax  # noqa: F401  (still importable)
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(tmp_path)]))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
