"""How a ``bedside`` process ends: the objects alive when the command is done are frozen (toolkit/_process.py
``no_collection_at_exit``), so that the interpreter's shutdown collections skip them; exit handlers still run."""

from __future__ import annotations

from tests.test_cli_process import bedside_process

REPORT = ("import atexit, gc; atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0, "
          "file=sys.stderr))")


def test_a_finished_command_leaves_its_objects_frozen_for_the_shutdown() -> None:
    done = bedside_process(["--version"], prelude=REPORT)
    assert done.returncode == 0, done.stderr
    assert "frozen at exit: True" in done.stderr


def test_a_failed_command_is_frozen_too_and_says_its_one_line(tmp_path) -> None:
    done = bedside_process(["compare", "--all", "--store", str(tmp_path / "missing")], prelude=REPORT)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("bedside: error: ") and lines[-1] == "frozen at exit: True", done.stderr
