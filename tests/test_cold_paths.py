"""Cold-command shortcuts keep their numbers: what they load is what the plain path loads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_student_t_ufuncs_are_scipys_own_loaded_without_the_array_api_layer() -> None:
    code = textwrap.dedent("""
        import sys
        from toolkit._process import student_t_ufuncs
        t = student_t_ufuncs()
        assert "scipy._lib._array_api" not in sys.modules, "the array-API layer was imported"
        assert "scipy.special" not in sys.modules
        import scipy.special as special  # the real package still imports, and exports the same objects
        assert special.stdtr is t.stdtr and special.stdtrit is t.stdtrit
        assert student_t_ufuncs().stdtr is special.stdtr
        print(t.stdtrit(7.0, 0.975))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == 2.364624251592784  # scipy.stats.t.ppf(0.975, 7)


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
