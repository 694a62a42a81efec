"""Every notebook under notebooks/ is committed without outputs, opens with the question it answers,
reads the user's store (never builds its own) and runs top to bottom on a real kernel (nbclient)
against the demo store. What each notebook shows is checked in tests/test_notebook_<name>.py; this
file also checks the harness (tests/notebook_support.py) itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebook_support import (CLEAR_HINT, executed, notebook_paths, parse_polars_tables, require_notebook_tools,
                                    run_notebook, stored_problems)

NOTEBOOKS = notebook_paths()
IDS = [p.name for p in NOTEBOOKS]


def code_sources(path: Path) -> list[str]:
    import nbformat

    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_there_are_notebooks() -> None:
    assert {"01-quickstart.ipynb", "02-comparing-models.ipynb", "04-sql.ipynb"} <= set(IDS), IDS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_without_outputs(path: Path) -> None:
    require_notebook_tools()
    problems = stored_problems(path)
    assert not problems, f"{problems[0]} ({len(problems)} cells); {CLEAR_HINT}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_opens_with_its_question(path: Path) -> None:
    require_notebook_tools()
    import nbformat

    first = nbformat.read(path, as_version=4).cells[0]
    heading = first.source.strip().splitlines()[0] if first.source.strip() else ""
    assert first.cell_type == "markdown" and heading.startswith("#") and heading.rstrip().endswith("?"), \
        f"{path.name}: the first cell should be markdown whose heading is the question the notebook answers"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_reads_the_users_store(path: Path) -> None:
    require_notebook_tools()
    code = "\n".join(code_sources(path))
    for builds in ("run_demo(", "TemporaryDirectory", "mkdtemp", "Store.open(\"", "Store.open('"):
        assert builds not in code, f"{path.name}: {builds!r}: open the user's store with bs.Store.open()"
    assert "Store.open()" in code, f"{path.name}: open the user's store with bs.Store.open()"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_top_to_bottom_on_the_demo_store(path: Path, demo_store: Path) -> None:
    shown = executed(path.name, demo_store)
    codes = [c for c in shown.node.cells if c.cell_type == "code"]
    assert codes and all(c.execution_count for c in codes), f"{path.name}: a code cell did not run"


# ---- the harness itself


def test_a_failing_cell_is_one_line_naming_it(tmp_path: Path, demo_store: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    path = tmp_path / "broken.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("# Does it fail?"), new_code_cell("import os\nx = 1"),
                                       new_code_cell("# the store the kernel sees\nraise ValueError(os.environ"
                                                     "['BEDSIDE_STORE'])")]), path)
    with pytest.raises(AssertionError) as failure:
        run_notebook(path, demo_store)
    message = str(failure.value)
    assert message == f"broken.ipynb: cell 2 (# the store the kernel sees) failed: ValueError: {demo_store}", message


def test_outputs_in_a_committed_notebook_are_found(tmp_path: Path) -> None:
    require_notebook_tools()
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    path = tmp_path / "kept.ipynb"
    cells = [new_code_cell("1 + 1"), new_code_cell("print('x')", execution_count=2,
                                                   outputs=[new_output("stream", name="stdout", text="x\n")])]
    nbformat.write(new_notebook(cells=cells), path)
    assert stored_problems(path) == ["kept.ipynb: cell 1 (print('x')) has stored outputs or an execution count"]


def test_polars_frames_are_read_back_from_their_text() -> None:
    import polars as pl

    frame = pl.DataFrame({"run_id": ["sim/strong", 'a-"run"-id <longer> than the shown width of it'],
                          "a_column_name_that_is_long": [0.5, 0.25]})
    html = f"<p>before</p>{frame._repr_html_()}<p>between</p>{frame.head(1)._repr_html_()}"
    parsed = parse_polars_tables(html)
    assert [len(t) for t in parsed] == [2, 1]
    assert parsed[0][0] == {"run_id": "sim/strong", "a_column_name_that_is_long": "0.5"}
    assert parsed[0][1]["run_id"].startswith('a-"run"-id <longer>') and parsed[0][1]["run_id"].endswith("…")


def test_a_cell_over_its_time_is_one_line_naming_it(tmp_path: Path, demo_store: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    path = tmp_path / "slow.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("import time\ntime.sleep(30)")]), path)
    with pytest.raises(AssertionError) as failure:
        run_notebook(path, demo_store, timeout=2)
    assert str(failure.value) == "slow.ipynb: cell 1 (import time) timed out after 2 s", str(failure.value)


def test_missing_tools_skip_here_and_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nbclient" else real(name, *a))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="nbclient missing"):
        require_notebook_tools()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="nbclient missing: .*CI must run the notebooks"):
        require_notebook_tools()
