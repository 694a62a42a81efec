"""Running the notebooks under notebooks/ headless, as a user's Jupyter would, and reading what they show.

    from tests.notebook_support import executed
    shown = executed("01-quickstart.ipynb", demo_store)   # demo_store: the session fixture (conftest)
    shown.text("leaderboard")          # what the cell tagged "leaderboard" printed or displayed
    shown.table("leaderboard")         # the polars frame it displayed, read back: [{column: shown text}]
    shown.has_png("figure")            # it drew an image

``executed`` runs a notebook once per session and store (``run_notebook`` runs it each time). A
notebook runs on a real IPython kernel through nbclient, started as JupyterLab starts it (in
notebooks/, with ``BEDSIDE_STORE`` pointing at the store: `make lab` sets it; ``MPLBACKEND=Agg``), so
``bs.Store.open()`` opens the store a user's would. Notebooks must not write files. Cells are found
by their Jupyter cell tags (``metadata.tags``; in JupyterLab: the property inspector). A failing
cell fails the test with ONE line naming the notebook, the cell's index, its first source line and
the error. Show frames as a cell's value (or with ``display``) so ``table`` can read them back.

nbclient, nbformat and ipykernel come with the ``test`` extra; when one is missing the notebook
tests skip on a developer machine and fail in CI (CI=true).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TIMEOUT_S = 180  # per cell; a whole notebook on the demo store takes seconds
CLEAR_HINT = "clear them before committing: jupyter nbconvert --clear-output --inplace notebooks/*.ipynb"
_NEEDED = ("nbclient", "nbformat", "ipykernel")


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def require_notebook_tools() -> None:
    """Skip (developer machine) or fail (CI=true) when a package the headless run needs is missing."""
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        message = f"{', '.join(missing)} missing: install the test extra (pip install -e '.[test]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}; CI must run the notebooks")
        pytest.skip(message)


def build_demo_store(folder: Path) -> Path:
    """Run the real ``bedside demo`` into ``folder`` (about 7 s) and return the store's path."""
    store = folder / "store"
    done = subprocess.run([sys.executable, "-m", "toolkit", "demo", "--store", str(store), "--progress", "none"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "BEDSIDE_STORE": str(store)})
    if done.returncode != 0:
        pytest.fail(f"bedside demo failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return store


def stored_problems(path: Path) -> list[str]:
    """Code cells of a committed notebook that carry outputs or execution counts (one line each)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])  # plain JSON: no schema load
    return [f"{path.name}: cell {index} ({first_line(cell)}) has stored outputs or an execution count"
            for index, cell in enumerate(cells)
            if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)]


def first_line(cell: Any) -> str:
    source = cell["source"]
    lines = [line for line in ("".join(source) if isinstance(source, list) else source).splitlines() if line.strip()]
    return lines[0].strip()[:80] if lines else "<empty>"


@dataclass(frozen=True, eq=False)
class ExecutedNotebook:
    """An executed notebook (``node``: nbformat's NotebookNode with every output) and readers of it."""

    name: str
    node: Any
    seconds: float

    def tagged(self, tag: str) -> list[Any]:
        cells = [c for c in self.node.cells if tag in c.get("metadata", {}).get("tags", [])]
        if not cells:
            raise AssertionError(f"{self.name}: no cell tagged {tag!r}")
        return cells

    def outputs(self, tag: str) -> list[Any]:
        return [out for cell in self.tagged(tag) if cell.cell_type == "code" for out in cell.get("outputs", [])]

    def text(self, tag: str) -> str:
        """Everything the cells tagged ``tag`` printed or displayed, as plain text, in order."""
        parts = []
        for out in self.outputs(tag):
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                parts.append(out.get("data", {}).get("text/plain", ""))
        return "\n".join(parts)

    def has_png(self, tag: str) -> bool:
        return any("image/png" in out.get("data", {}) for out in self.outputs(tag))

    def pngs(self, tag: str) -> int:
        return sum("image/png" in out.get("data", {}) for out in self.outputs(tag))

    def markdown(self) -> list[str]:
        return [c.source for c in self.node.cells if c.cell_type == "markdown"]

    def tables(self, tag: str) -> list[list[dict[str, str]]]:
        """Every polars frame the cells tagged ``tag`` displayed (as a cell's value or with ``display``;
        a printed frame is only text), read back from its HTML form."""
        return [frame for out in self.outputs(tag)
                for frame in parse_polars_tables(out.get("data", {}).get("text/html", ""))]

    def table(self, tag: str) -> list[dict[str, str]]:
        """The one polars frame the cells tagged ``tag`` displayed (AssertionError for none or several)."""
        found = self.tables(tag)
        if len(found) != 1:
            raise AssertionError(f"{self.name}: cell tagged {tag!r} shows {len(found)} frames, expected one")
        return found[0]


class _FrameHTML(HTMLParser):
    """The tables of polars' HTML repr: a header row, a dtype row (in thead), then the shown rows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def parse_polars_tables(html: str) -> list[list[dict[str, str]]]:
    """Rows (column -> cell text as shown) of each polars frame in ``html`` (its ``_repr_html_``).
    String cells lose polars' quotes; a shortened frame keeps its ``…`` row, a long string its ``…``."""
    parser = _FrameHTML()
    parser.feed(html)
    frames = []
    for rows in parser.tables:
        if len(rows) < 2:
            continue
        header, dtypes, body = rows[0], rows[1], rows[2:]
        frames.append([{name: _unquote(cell) if dtype == "str" else cell
                        for name, dtype, cell in zip(header, dtypes, row)} for row in body])
    return frames


def _unquote(cell: str) -> str:
    if cell.startswith('"') and (cell.endswith('"') and len(cell) > 1 or cell.endswith("…")):
        return cell[1:-1] if cell.endswith('"') else cell[1:]
    return cell


def run_notebook(name: str | Path, store: Path, timeout: int = TIMEOUT_S, cwd: Path = NOTEBOOKS) -> ExecutedNotebook:
    """Execute notebooks/<name> (or the notebook at a Path) on a fresh kernel started in ``cwd`` (notebooks/,
    where Jupyter starts it) with ``BEDSIDE_STORE=store``; AssertionError (one line: notebook, cell index,
    first source line, error) when a cell fails."""
    require_notebook_tools()
    import nbformat
    from nbclient import NotebookClient

    path = name if isinstance(name, Path) else NOTEBOOKS / name
    name = path.name
    node = nbformat.read(path, as_version=4)
    env = {**os.environ, "BEDSIDE_STORE": str(store), "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env.pop("JPY_PARENT_PID", None)
    client = NotebookClient(node, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(cwd)}})
    started = time.perf_counter()
    try:
        client.execute(env=env)
    except Exception as error:  # a failing cell, a timeout, a dead kernel, no python3 kernel: one line each
        if isinstance(error, TimeoutError):  # nbclient interrupts the cell: it shows a KeyboardInterrupt
            error = TimeoutError(f"timed out after {timeout} s")
        raise AssertionError(failing_cell(name, node, error)) from None
    return ExecutedNotebook(name, node, time.perf_counter() - started)


_EXECUTED: dict[tuple[str, str], ExecutedNotebook] = {}


def executed(name: str, store: Path) -> ExecutedNotebook:
    """``run_notebook`` once per session and store: the generic run-every-notebook test and a notebook's
    own checks share one execution (a failed run is not cached, so each test reports it)."""
    key = (name, str(store))
    if key not in _EXECUTED:
        _EXECUTED[key] = run_notebook(name, store)
    return _EXECUTED[key]


def failing_cell(name: str, node: Any, error: Exception) -> str:
    for index, cell in enumerate(node.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "error":
                why = str(error) if isinstance(error, TimeoutError) else f"failed: {out.ename}: {out.evalue}"
                return f"{name}: cell {index} ({first_line(cell)}) {why}"
    last = next((i for i in range(len(node.cells) - 1, -1, -1)
                 if node.cells[i].cell_type == "code" and node.cells[i].get("execution_count")), None)
    where = f"after cell {last}" if last is not None else "before the first cell"
    return f"{name}: {where}: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
