"""The speed work played against: closed streams at the quick exit, Ctrl-C while helper threads run, and
failures inside helper threads. Real processes where the process is what is tested."""

from __future__ import annotations

import subprocess
import sys


def _bedside_closed(args: list[str], closed: str) -> subprocess.CompletedProcess:
    """The command through the ``bedside`` script's entry, with the shell's ``>&-`` or ``2>&-`` applied (Python
    then starts with ``sys.stdout`` or ``sys.stderr`` set to None)."""
    code = f"import sys\nsys.argv = ['bedside', *{args!r}]\nfrom toolkit.cli import entry\nsys.exit(entry())"
    return subprocess.run(["sh", "-c", f'exec "$0" -c "$1" {closed}', sys.executable, code],
                          capture_output=True, text=True)


def test_a_closed_stdout_keeps_the_exit_status_and_shows_no_traceback(tmp_path) -> None:
    usage = _bedside_closed(["summary", "--no-such-flag"], ">&-")
    assert usage.returncode == 2, usage.stderr
    assert "Traceback" not in usage.stderr and "No such option" in usage.stderr
    empty = _bedside_closed(["runs", "--store", str(tmp_path / "none")], ">&-")
    assert empty.returncode == 0 and "Traceback" not in empty.stderr


def test_a_closed_stderr_keeps_a_success_a_success(tmp_path) -> None:
    empty = _bedside_closed(["runs", "--store", str(tmp_path / "none")], "2>&-")
    assert empty.returncode == 0
    assert "the store has no runs" in empty.stdout
