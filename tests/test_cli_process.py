"""Short read-only commands keep the memory they free (glibc mallopt): fewer fresh pages, same output."""

from __future__ import annotations

import subprocess
import sys

import pytest

import toolkit.cli as cli

CHURN = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from toolkit.cli import _keep_freed_memory
    _keep_freed_memory()


def step():  # 24 MB at once, touched, then freed: more than glibc keeps by default
    a, b, c = np.ones(1 << 20), np.ones(1 << 20), np.ones(1 << 20)
    return a.sum() + b.sum() + c.sum()


step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, env: dict[str, str] | None = None) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True, env=env)
    return int(out.stdout)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_freed_blocks_are_reused_instead_of_faulted_in_again() -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    default, kept = _faults("default", env), _faults("keep", env)
    assert default > 20 * 1000  # ~20 x 1500 pages faulted in again by default
    assert kept < default / 5
    # A MALLOC_* setting of the user's own wins: nothing is changed.
    assert _faults("keep", {**env, "MALLOC_ARENA_MAX": "2"}) > 20 * 1000


def test_only_short_read_commands_ask_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_keep_freed_memory", lambda: calls.append("kept"))
    monkeypatch.setattr(cli, "_quick_exit", lambda code: None)  # the process entry would end this process
    monkeypatch.setattr("toolkit.cli.common.run_safely", lambda group, args: 0)
    for argv, expected in ((["compare", "--all"], ["kept"]), (["summary", "--all"], ["kept"]), (["run", "--help"], []),
                           (["demo"], []), (["--version"], []), ([], [])):
        calls.clear()
        monkeypatch.setattr(sys, "argv", ["bedside", *argv])
        assert cli.entry() == 0
        assert calls == expected, argv
    calls.clear()
    assert cli.main(["compare", "--all"]) == 0 and calls == []  # in a process of its own (a test, a notebook): untouched
    assert {"run", "judge", "demo", "sim", "import", "dataset"}.isdisjoint(cli.SHORT_READERS)
    assert cli.SHORT_READERS <= set(cli.COMMANDS)


def bedside_process(args: list[str], prelude: str = "", redirect: str = "") -> subprocess.CompletedProcess:
    """The command as a process, through the ``bedside`` script's own entry; ``prelude`` runs first, and
    ``redirect`` is applied by the shell (``>&-`` or ``2>&-``: Python then starts with that stream None)."""
    code = f"import sys\n{prelude}\nsys.argv = ['bedside', *{args!r}]\nfrom toolkit.console import run\nsys.exit(run())"
    argv = ["sh", "-c", f'exec "$0" -c "$1" {redirect}', sys.executable, code] if redirect else \
        [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True)


def test_a_short_reader_ends_quickly_with_its_output_whole_and_exit_handlers_run(demo_store) -> None:
    import json

    handler = "import atexit; atexit.register(lambda: print('exit handler ran', file=sys.stderr))"
    done = bedside_process(["compare", "--all", "--store", str(demo_store), "--format", "json"], prelude=handler)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["leaderboard"]) == 4  # every byte of a large output arrived
    assert "exit handler ran" in done.stderr
    # The same as the in-process main gives.
    listing = bedside_process(["runs", "--store", str(demo_store), "--json"])
    assert listing.returncode == 0 and len(json.loads(listing.stdout)) == 4


def test_a_short_reader_keeps_its_exit_status_and_its_one_line(tmp_path) -> None:
    done = bedside_process(["compare", "--all", "--store", str(tmp_path / "none")])
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "the store has no runs" in done.stderr and done.stdout == ""
    usage = bedside_process(["summary", "--no-such-flag"])
    assert usage.returncode == 2 and "No such option" in usage.stderr


@pytest.mark.parametrize("how", ["KeyboardInterrupt()", "RuntimeError('in __set_name__') from KeyboardInterrupt()"])
def test_ctrl_c_while_the_command_line_is_imported_is_one_line(how: str) -> None:
    # As a Ctrl-C at 0.05-0.1 s does: the interrupt lands inside an import (raised from an import hook).
    prelude = f"""
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise {how}
sys.meta_path.insert(0, Interrupt())
sys.argv = ["bedside", "compare", "--all"]
from toolkit.console import run
sys.exit(run())
"""
    done = subprocess.run([sys.executable, "-c", prelude], capture_output=True, text=True)
    assert done.returncode == 130 and done.stderr == "bedside: interrupted\n" and done.stdout == ""


def test_another_failure_while_importing_is_not_taken_for_ctrl_c() -> None:
    prelude = """
import sys
class Broken:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise ImportError("no click here")
sys.meta_path.insert(0, Broken())
from toolkit.console import run
run()
"""
    done = subprocess.run([sys.executable, "-c", prelude], capture_output=True, text=True)
    assert done.returncode == 1 and "ImportError: no click here" in done.stderr
