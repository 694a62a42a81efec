"""Every notebook under notebooks/ runs top to bottom against the current API, so none can rot.

The code cells of a notebook are executed in order in one namespace, from the repository root,
with matplotlib on the non-interactive Agg backend. Notebooks are kept without outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4, f"{path.name}: nbformat {notebook['nbformat']}, expected 4"
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    for index, cell in enumerate(cells):
        assert not cell.get("outputs") and cell.get("execution_count") is None, \
            f"{path.name}: code cell {index} has stored outputs; clear them before committing"
    return ["".join(c["source"]) for c in cells]


def test_there_is_a_notebook() -> None:
    assert [p.name for p in NOTEBOOKS if p.name == "explore.ipynb"] == ["explore.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")  # before the notebook's first matplotlib import
    monkeypatch.chdir(ROOT)
    import matplotlib

    matplotlib.use("Agg")  # in case an earlier test imported matplotlib with another backend
    import matplotlib.pyplot as plt

    namespace: dict[str, object] = {"__name__": "__notebook__"}
    try:
        for index, source in enumerate(code_cells(path)):
            try:
                exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)
            except Exception as error:
                raise AssertionError(f"{path.name}: code cell {index} failed: {type(error).__name__}: {error}") \
                    from error
    finally:
        plt.close("all")
