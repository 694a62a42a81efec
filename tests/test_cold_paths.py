"""Cold-command shortcuts (toolkit/_process.py) load what the plain path loads, and leave the process as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_loading_a_dataset_validates_it_without_a_python_schema_library() -> None:
    """Cases are validated by the compiled jsonschema_rs: the pure-Python jsonschema (and the grammars its
    optional format checks build on import) never loads."""
    code = textwrap.dedent("""
        import sys
        import toolkit
        toolkit.load_dataset(None)
        assert "jsonschema_rs" in sys.modules, "the dataset was not validated"
        assert "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_student_t_loads_scipys_own_ufuncs_without_the_array_api_layer() -> None:
    code = textwrap.dedent("""
        import sys
        from toolkit._process import student_t
        t = student_t()
        assert "scipy._lib._array_api" not in sys.modules, "the array-API layer was imported"
        assert "scipy.special" not in sys.modules
        import scipy.special as special  # the real package still imports, and exports the same objects
        assert special.stdtr is t.stdtr and special.stdtrit is t.stdtrit
        assert student_t().stdtr is special.stdtr
        print(t.stdtrit(7.0, 0.975))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == 2.364624251592784  # scipy.stats.t.ppf(0.975, 7)


def test_a_cold_compare_imports_neither_scipy_stats_nor_the_array_api_layer(tmp_path) -> None:
    """Exact Wilcoxon rows are counted here and the t ufuncs loaded bare: a cold compare of runs whose
    benchmark rows take scipy's exact branch needs no scipy.stats."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import numpy as np
        from tests.analysis_sim import write_run
        from toolkit.analysis.compare import CompareOptions, compare
        from toolkit.analysis.paired import ResampleSettings
        from toolkit.analysis.wilcoxon import wilcoxon_p
        from toolkit.dataset import load_dataset
        from toolkit.store import Store
        store, dataset = Store.open(Path({str(tmp_path)!r}) / "s"), load_dataset(None)
        for i in range(3):
            write_run(store, dataset, f"run-{{i}}", skill=0.3 * i, seed=i)
        compare(store, store.run_ids(), CompareOptions(resamples=ResampleSettings(samples=200, seed=1), per_benchmark=True))
        assert wilcoxon_p(np.array([[0.1, -0.3, 0.25, 0.4, 0.05]]))[0] == 0.4375  # scipy's exact branch
        loaded = sorted(m for m in ("scipy.stats", "scipy._lib._array_api") if m in sys.modules)
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr[-2000:]
