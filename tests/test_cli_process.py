"""The command as a process, through the ``bedside`` script's own entry: output whole, exit status, one line."""

from __future__ import annotations

import subprocess
import sys

import pytest


def bedside_process(args: list[str], prelude: str = "", redirect: str = "") -> subprocess.CompletedProcess:
    """The command as a process, through the ``bedside`` script's own entry; ``prelude`` runs first, and
    ``redirect`` is applied by the shell (``>&-`` or ``2>&-``: Python then starts with that stream None)."""
    code = f"import sys\n{prelude}\nsys.argv = ['bedside', *{args!r}]\nfrom toolkit.console import run\nsys.exit(run())"
    argv = ["sh", "-c", f'exec "$0" -c "$1" {redirect}', sys.executable, code] if redirect else \
        [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True)


def test_a_command_ends_with_its_output_whole_and_exit_handlers_run(demo_store) -> None:
    import json

    handler = "import atexit; atexit.register(lambda: print('exit handler ran', file=sys.stderr))"
    done = bedside_process(["compare", "--all", "--store", str(demo_store), "--format", "json"], prelude=handler)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["leaderboard"]) == 4  # every byte of a large output arrived
    assert "exit handler ran" in done.stderr
    # The same as the in-process main gives.
    listing = bedside_process(["runs", "--store", str(demo_store), "--json"])
    assert listing.returncode == 0 and len(json.loads(listing.stdout)) == 4


def test_a_command_keeps_its_exit_status_and_its_one_line(tmp_path) -> None:
    done = bedside_process(["compare", "--all", "--store", str(tmp_path / "none")])
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "the store has no runs" in done.stderr and done.stdout == ""
    usage = bedside_process(["summary", "--no-such-flag"])
    assert usage.returncode == 2 and "No such option" in usage.stderr


@pytest.mark.parametrize("args", [["summary", "--no-such-flag"], ["compare", "--all", "--seed", "1.5"],
                                  ["run"], ["report", "--format", "pdf"], ["no-such-command"]])
def test_a_bad_flag_is_one_line_naming_the_help(args: list[str]) -> None:
    """A usage error is one line, like every other refusal, and says where the help is (exit 2, as click's)."""
    usage = bedside_process(args)
    assert usage.returncode == 2 and usage.stdout == ""
    assert usage.stderr.count("\n") == 1 and usage.stderr.startswith("bedside: error: "), usage.stderr
    assert "--help" in usage.stderr


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


@pytest.mark.parametrize("args", [["runs"], ["runs", "compact"], ["compare", "--all"]])
def test_ctrl_c_inside_a_command_is_one_line(tmp_path, args: list[str]) -> None:
    # As a Ctrl-C mid-command does: the interrupt lands in the command's own code (here, opening the store).
    prelude = f"""
import sys
import toolkit.cli.common as common
def interrupted(store_dir):
    raise KeyboardInterrupt
common.open_store = interrupted
sys.argv = ["bedside", *{[*args, "--store", str(tmp_path)]!r}]
from toolkit.console import run
sys.exit(run())
"""
    done = subprocess.run([sys.executable, "-c", prelude], capture_output=True, text=True)
    assert done.returncode == 130 and done.stderr == "bedside: interrupted\n" and done.stdout == "", done.stderr


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
