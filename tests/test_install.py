"""Install anywhere: the built wheel, installed into a fresh virtual environment outside the repository,
carries the sample dataset and the JSON Schemas, and its ``bedside`` runs the README's first commands
from an empty directory (the store lands in ./data/results there).

Offline and fast: the wheel is built without build isolation (setuptools comes with the test extra), it
is installed with ``--no-deps``, and the fresh environment finds the dependencies through a .pth line
pointing at this environment's site-packages (a plain path line: that folder's own .pth files, such
as an editable install's finder, are not run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "toolkit", "data/sample", "schemas")


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (no build/ or egg-info left in the clone, nothing stale)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", out,
         src], cwd=src)
    (built,) = out.glob("bedside-*.whl")
    return built


@pytest.mark.install
def test_the_wheel_holds_every_module_the_sample_and_the_schemas(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    # every module and every file it reads (templates, tables of providers, ...)
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "toolkit").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert files <= names, f"not in the wheel (add them to package-data in pyproject.toml): {sorted(files - names)}"
    sample = {p.relative_to(ROOT / "data" / "sample").as_posix() for p in (ROOT / "data" / "sample").rglob("*")
              if p.is_file()}
    assert {f"toolkit/_sample/{name}" for name in sample} <= names
    schemas = {p.name for p in (ROOT / "schemas").glob("*.json")}
    assert schemas and {f"toolkit/_schemas/{name}" for name in schemas} <= names
    assert not any(n.startswith(("data/", "schemas/", "tests/")) for n in names)  # nothing at the top level


@pytest.mark.install
def test_a_fresh_install_runs_demo_validate_and_compare_from_an_empty_directory(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=tmp_path).stdout.strip())
    (purelib / "_bedside_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--no-compile", "-q", wheel],
        cwd=tmp_path)

    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("BEDSIDE_STORE", "BEDSIDE_DATASET", "PYTHONPATH")}
    env["COLUMNS"] = "80"
    where = run([python, "-c", "import toolkit, toolkit.dataset as d; print(toolkit.__file__); "
                 "print(d.sample_dataset_path()); print(d.schema_path('points_rubric'))"], cwd=work, env=env)
    for path in where.stdout.split():
        assert Path(path).is_relative_to(venv) and not Path(path).is_relative_to(ROOT), path

    bedside = venv / "bin" / "bedside"
    demo = run([bedside, "demo", "--progress", "none"], cwd=work, env=env)
    assert f"store: {work / 'data' / 'results'}" in demo.stdout
    assert sum(line.startswith("│") for line in demo.stdout.splitlines()) == 4
    validate = run([bedside, "dataset", "validate"], cwd=work, env=env)
    assert validate.stdout.startswith("ok: 30 cases, ")
    compare = run([bedside, "compare", "--all"], cwd=work, env=env)
    leaderboard = compare.stdout.split("leaderboard", 1)[1].split("└", 1)[0]  # the first table, to its bottom
    assert sum(line.startswith("│ ") and "sim/" in line for line in leaderboard.splitlines()) == 4
    # it wrote the store and the demo's report there, nothing else
    assert {p.name for p in work.iterdir()} <= {"data", "reports"} and (work / "data" / "results" / "runs").is_dir()
