"""Run the benchmarks of tests/perf/ and print one table of every figure against its target.

Run: python tests/perf/run_all.py [--only NAME ...] [--skip NAME ...] [--timeout S]
     (or `make perf`)

A benchmark is a script in this folder that prints ROW lines through tests/perf/rows.py; each runs in
its own process, one after the other (they time themselves: never two at once), with its output passed
through as it comes. At the end: a Markdown table (what | measured | target | verdict) for the README's
measured section, with the date, the cores and the load average, since every wall time here depends on
what else the machine runs. A script that fails or prints no ROW line is a FAIL row of its own. Exit
status 0 when every row passes, else 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.perf.rows import Row, parse_rows  # noqa: E402

# The rows first (the order of its table), then any other benchmark in name order.
FIRST = ("summary_speed", "compare_scale", "import_speed", "import_memory", "collect_faults", "collect_throughput",
         "cold_run", "report_speed", "strict_json")


def benchmarks() -> list[str]:
    """Scripts of this folder that print ROW lines (they import tests/perf/rows.py)."""
    def prints_rows(path: Path) -> bool:
        text = path.read_text(encoding="utf-8")
        return "tests.perf.rows import" in text or "tests.perf import rows" in text

    found = sorted(p.stem for p in HERE.glob("*.py") if p.stem not in ("rows", "run_all") and prints_rows(p))
    return [n for n in FIRST if n in found] + [n for n in found if n not in FIRST]


def run(name: str, timeout: float) -> list[Row]:
    """Run one benchmark, echoing its output; its ROW lines (or one FAIL row saying why there are none)."""
    print(f"\n=== {name} ===", flush=True)
    started = time.perf_counter()
    lines: list[str] = []
    process = subprocess.Popen([sys.executable, str(HERE / f"{name}.py")], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert process.stdout is not None
    watchdog = threading.Timer(timeout, process.kill)  # a benchmark that hangs silently is stopped too
    watchdog.start()
    try:
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
        code = process.wait()
    except KeyboardInterrupt:
        process.kill()
        raise
    finally:
        watchdog.cancel()
    rows = parse_rows("".join(lines))
    seconds = time.perf_counter() - started
    print(f"=== {name}: {len(rows)} row(s), exit {code}, {seconds:.0f} s ===", flush=True)
    if code != 0 or not rows:
        why = "timed out" if seconds > timeout else f"exit {code}" if code else "no ROW line"
        rows.append(Row(f"{name}.py", f"did not finish ({why})", "a figure", False))
    return rows


def table(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "/")

    out = ["| what | measured | target | verdict |", "|---|---|---|---|"]
    out += [f"| {cell(r.what)} | {cell(r.figure)} | {cell(r.target)} | {'PASS' if r.ok else 'FAIL'} |" for r in rows]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these benchmarks (file stems)")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME", help="leave these out")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per benchmark")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and stop")
    args = parser.parse_args()
    names = benchmarks()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = [n for n in (args.only or []) + args.skip if n not in names]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)} (there are: {', '.join(names)})")
    chosen = [n for n in (args.only or names) if n not in args.skip]
    load_before = os.getloadavg()[0]
    rows = [r for name in chosen for r in run(name, args.timeout)]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nMeasured {stamp}, {os.cpu_count()} cores, load average {load_before:.1f} before and "
          f"{os.getloadavg()[0]:.1f} after; each ratio taken within one run of its benchmark.\n")
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
