"""The README's commands work, in order, on the store `make demo` leaves: every ``bedside`` command of its
```bash blocks runs as a process from a folder holding the demo's store at ./data/results and exits 0
(the SQL block is run by tests/test_db.py)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Commands that need what the demo does not give: a provider key, a reference-runner file.
NEEDS_MORE = {"run": "an API key", "import": "a reference-runner result file"}


def readme_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words:
                end = words.index("&&") if "&&" in words else len(words)
                if words[0] == "bedside":
                    commands.append(words[1:end])
                words = words[end + 1:]
    return commands


def test_the_readme_shows_the_tour() -> None:
    firsts = [words[0] for words in readme_commands()]
    assert {"compare", "report", "db"} <= set(firsts), firsts
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150 and any("reports/demo-report.png" in line for line in lines[:40])


def test_every_readme_command_runs_on_the_demo_store(demo_store: Path, tmp_path: Path) -> None:
    shutil.copytree(demo_store, tmp_path / "data" / "results")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEDSIDE_")}
    env["PYTHONPATH"] = str(ROOT)
    ran = []
    for words in readme_commands():
        if words[0] in NEEDS_MORE:
            continue
        done = subprocess.run([sys.executable, "-m", "toolkit", *words], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (words, done.stderr[-600:])
        ran.append(words[0])
    assert "compare" in ran and "report" in ran
