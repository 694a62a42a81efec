"""`make lab`: JupyterLab on notebooks/ with the store as an absolute $BEDSIDE_STORE (Jupyter starts each
kernel in notebooks/), after collecting the demo into a store that has no runs, and only then.

The recipe's own lines are taken from `make -n lab` and run by the shell, so the test follows the
Makefile; starting JupyterLab itself is left out (it needs the `notebooks` extra and a browser)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import toolkit as bs

ROOT = Path(__file__).resolve().parents[1]


def recipe(store: str) -> list[str]:
    if shutil.which("make") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("make is missing; CI must have it")
        pytest.skip("make is missing")
    # run inside `make test`, a child make would print its directory (MAKELEVEL, MAKEFLAGS): not the user's view
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env["BEDSIDE_STORE"] = store
    done = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\\\n", " ").splitlines()


def demo_step(lines: list[str]) -> str:
    [line] = [line for line in lines if "bedside demo" in line]
    return line


def test_jupyter_lab_opens_notebooks_with_the_store_as_an_absolute_path(tmp_path: Path) -> None:
    lines = recipe("data/elsewhere")  # relative, as a user may set it
    store = ROOT / "data" / "elsewhere"
    assert lines[-1].startswith(f"BEDSIDE_STORE='{store}' .venv/bin/jupyter lab --ServerApp.root_dir=notebooks")
    assert demo_step(lines).endswith("|| .venv/bin/bedside demo")  # as `make demo`: the user's own environment
    if not (ROOT / ".venv" / ".notebooks-stamp").exists():  # installed once; afterwards make skips the step
        assert any("pip install" in line and ".[test,notebooks]" in line for line in lines)


def test_a_store_with_runs_is_left_alone(demo_store: Path) -> None:
    store = bs.Store.open(demo_store)
    before = (store.run_ids(), store.version())
    done = subprocess.run(demo_step(recipe(str(demo_store))), shell=True, cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "BEDSIDE_STORE": str(demo_store)})
    assert done.returncode == 0 and "Leaderboard" not in done.stdout, done.stderr
    again = bs.Store.open(demo_store)
    assert (again.run_ids(), again.version()) == before


def test_a_store_without_runs_gets_the_demo(tmp_path: Path) -> None:
    # the demo itself is tested in test_demo.py; here: the recipe calls it for an empty or missing store
    for target in (tmp_path / "missing", tmp_path / "empty"):
        step = demo_step(recipe(str(target)))
        assert step.endswith(".venv/bin/bedside demo")
        (tmp_path / "empty").mkdir(exist_ok=True)
        done = subprocess.run(step.replace(".venv/bin/bedside demo", "echo the-demo-runs"), shell=True, cwd=ROOT,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "BEDSIDE_STORE": str(target)})
        assert (done.returncode, done.stdout.strip()) == (0, "the-demo-runs"), done.stderr
