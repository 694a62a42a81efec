"""Timing one command as its own process, as a user runs it (shared by the tests/perf import benchmarks)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time


def timed(argv: list[str]) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, CPU s, peak RSS MB, its output) of a child process, from wait4's accounting: the
    child's own CPU and peak memory, not this script's."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read()
