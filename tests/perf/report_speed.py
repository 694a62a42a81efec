"""Benchmark: a cold ``bedside report --all`` of 10 runs x 500 cases, figures included.

Run: python tests/perf/report_speed.py [--runs 10] [--repeat 2]

Builds the 500-case panel from the public split (tests/perf/panel.py) and writes simulated runs
through Store.write (as compare_scale.py does), then times the command as a fresh process (interpreter
start, imports, reading, every analysis, every figure, HTML/Markdown/CSV out), ``--repeat`` times.
Prints the wall time and the report's own split (``--timings``: read, analysis, figures, writing).
Target: <= 15 s wall on this machine. The CPU seconds and the load average are printed too: the machine is
shared, and a wall time taken at load 8 on 2 cores says more about the neighbours than about the report.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf.compare_scale import build_store  # noqa: E402
from tests.perf.rows import row  # noqa: E402

TARGET_S = 15.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="report-speed-"))
    try:
        t0 = time.perf_counter()
        store = build_store(work, args.runs)
        print(f"store: {args.runs} runs x 500 cases built in {time.perf_counter() - t0:.1f} s")
        walls, cpus = [], []
        for i in range(args.repeat):
            out = work / f"report-{i}"
            command = [sys.executable, "-m", "toolkit", "report", "--all", "--store", str(store.root),
                       "--out", str(out), "--timings"]
            t0 = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if done.returncode:
                print(done.stderr, file=sys.stderr)
                return 1
            walls.append(wall)
            cpus.append(cpu)
            split = {line.split()[0]: float(line.split()[1]) for line in done.stdout.splitlines()
                     if len(line.split()) == 3 and line.split()[2] == "s"}
            inside = split.pop("total", sum(split.values()))
            size = (out / "index.html").stat().st_size / 1e6
            print(f"run {i + 1}: wall {wall:.2f} s, CPU {cpu:.2f} s, load {os.getloadavg()[0]:.1f} (start-up and imports {wall - inside:.2f} s; "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in split.items()) + f"); index.html {size:.1f} MB, "
                  f"{len(list((out / 'figures').iterdir()))} figures, {len(list((out / 'tables').iterdir()))} tables")
        best = min(walls)
        print(f"cold report of {args.runs} runs x 500 cases: best {best:.2f} s, worst {max(walls):.2f} s "
              f"(target <= {TARGET_S:.0f} s): {'OK' if max(walls) <= TARGET_S else 'MISSED'}")
        row(f"bedside report --all, {args.runs} runs x 500 cases, cold",
            f"{max(walls):.2f} s wall (worst of {len(walls)}), {max(cpus):.2f} s CPU, load {os.getloadavg()[0]:.1f}",
            f"<= {TARGET_S:.0f} s wall", max(walls) <= TARGET_S)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
