"""Cold-command shortcuts keep their numbers: what they load is what the plain path loads."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_t_distribution_loads_scipys_own_ufuncs_without_the_array_api_layer() -> None:
    code = textwrap.dedent("""
        import sys
        from toolkit.analysis.paired_t import _t_distribution
        t = _t_distribution()
        assert "scipy._lib._array_api" not in sys.modules, "the array-API layer was imported"
        assert "scipy.special" not in sys.modules
        import scipy.special as special  # the real package still imports, and exports the same objects
        assert special.stdtr is t.stdtr and special.stdtrit is t.stdtrit
        assert _t_distribution().stdtr is special.stdtr
        print(t.stdtrit(7.0, 0.975))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == 2.364624251592784  # scipy.stats.t.ppf(0.975, 7)


def test_loading_a_dataset_does_not_build_the_iri_grammar_and_leaves_it_importable() -> None:
    """jsonschema is imported without rfc3987_syntax (~1.2 s of CPU, for a format check never used), and the
    module is not blocked for the rest of the process: a notebook can still import it."""
    code = textwrap.dedent("""
        import importlib.util, sys
        import toolkit
        toolkit.load_dataset(None)
        assert "rfc3987_syntax" not in sys.modules, "the IRI grammar was imported, or left blocked"
        if importlib.util.find_spec("rfc3987_syntax") is not None:
            import rfc3987_syntax  # noqa: F401  (still importable)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
