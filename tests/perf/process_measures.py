"""Benchmark: what each measure of toolkit/_process.py buys a cold command, against the plain way.

Run: python tests/perf/process_measures.py [--pairs 9]

For each measure, times the cold command it serves as a new process, with the measure and with the plain
way put in its place (the same driver either way: only the one function differs), in turn, after one
unmeasured run of each. The gain is the median over the pairs of plain / with - 1, by wall and by CPU
(user + sys of the child). A measure stays in toolkit/_process.py only while it buys >= 10 % of its
command (issue 18); one ROW line each, judged by the figure the measure acts on.

student_t serves every command that prints a pair (here ``bedside compare --all`` on 30 runs x 500 cases,
tests/perf/compare_scale.py): judged by wall. no_collection_at_exit spares the shutdown of a process that
holds many objects, most of all a collection's (the openai SDK's models): timed on a cold ``bedside run``
of 500 cases at 200 ms latency and C = 100 against the simulated provider, a fresh store each time (as
tests/perf/cold_run.py), and judged by CPU, since two of that run's four seconds are the provider's latency,
which no measure of this process can buy; the same compare beside it for context.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf.child import timed  # noqa: E402
from tests.perf.panel import build_panel, shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402

TARGET = 0.10

# measure -> the plain way, as code run before the command (it replaces the measure's function)
PLAIN = {
    "student_t": """
        def plain():
            import types
            from scipy import special
            return types.SimpleNamespace(stdtr=special.stdtr, stdtrit=special.stdtrit)
        _process.student_t = plain
    """,
    "no_collection_at_exit": """
        _process.no_collection_at_exit = lambda: None
    """,
}


def driver(args: list[str], plain: str = "", fresh: str | None = None) -> list[str]:
    """A new process running ``bedside ARGS`` as the console script does, after ``plain`` (if any); ``fresh``:
    a folder removed first (the store a run writes, new each time)."""
    clear = f"import shutil\nshutil.rmtree({fresh!r}, ignore_errors=True)\n" if fresh else ""
    code = clear + "import sys\nfrom toolkit import _process\n" + textwrap.dedent(plain) + textwrap.dedent(f"""
        sys.argv = ["bedside", *{args!r}]
        from toolkit.console import run
        sys.exit(run())
    """)
    return [sys.executable, "-c", code]


def gains(name: str, args: list[str], pairs: int, fresh: str | None = None) -> tuple[float, float, float, float]:
    """(wall gain, CPU gain, median wall with the measure, median wall without) over ``pairs`` pairs."""
    with_it, without = driver(args, fresh=fresh), driver(args, PLAIN[name], fresh)
    for argv in (with_it, without):  # unmeasured: byte code written, page cache warm
        code, *_, output = timed(argv)
        if code != 0:
            raise SystemExit(f"{name}: the command failed ({code}): {output[-1000:]}")
    walls, cpus, a_walls, b_walls = [], [], [], []
    for _ in range(pairs):  # in turn: a drift of the machine's speed moves both sides of a pair
        _, a_wall, a_cpu, _, _ = timed(with_it)
        _, b_wall, b_cpu, _, _ = timed(without)
        walls.append(b_wall / a_wall)
        cpus.append(b_cpu / a_cpu)
        a_walls.append(a_wall)
        b_walls.append(b_wall)
    return (statistics.median(walls) - 1, statistics.median(cpus) - 1, statistics.median(a_walls),
            statistics.median(b_walls))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--store", default=None, help="a built store of 30 runs x 500 cases (default: build one)")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the user's setting: byte code cached
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    target = f">= +{TARGET:.0%}"
    with tempfile.TemporaryDirectory() as tmp:
        from tests.perf.compare_scale import build_store

        root = args.store or str(build_store(Path(tmp), 30).root)
        compare = ["compare", "--all", "--store", root]
        wall, cpu, with_s, without_s = gains("student_t", compare, args.pairs)
        row("toolkit/_process.py student_t: gain on a cold `bedside compare --all`, 30 runs x 500 cases",
            _measured(wall, cpu, with_s, without_s, args.pairs), f"{target} by wall", wall >= TARGET)
        panel = build_panel(shared_root(), Path(tmp))
        server = subprocess.Popen([sys.executable, "-m", "toolkit", "sim", "serve", "--latency-ms", "200", "--dataset",
                                   str(panel)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            store = str(Path(tmp) / "run-store")
            run = ["run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url",
                   server.stdout.readline().strip(), "--concurrency", "100", "--dataset", str(panel), "--store", store,
                   "--progress", "none"]
            wall, cpu, with_s, without_s = gains("no_collection_at_exit", run, args.pairs, fresh=store)
        finally:
            server.terminate()
            server.wait()
        row("toolkit/_process.py no_collection_at_exit: gain on a cold `bedside run`, 500 cases, 200 ms, C = 100",
            _measured(wall, cpu, with_s, without_s, args.pairs), f"{target} by CPU", cpu >= TARGET)
        wall, cpu, with_s, without_s = gains("no_collection_at_exit", compare, args.pairs)
        row("toolkit/_process.py no_collection_at_exit: gain on a cold `bedside compare --all`, 30 runs x 500 cases",
            _measured(wall, cpu, with_s, without_s, args.pairs), "(context)", True)


def _measured(wall: float, cpu: float, with_s: float, without_s: float, pairs: int) -> str:
    return (f"{wall:+.0%} by wall ({with_s:.2f} s with, {without_s:.2f} s without; median of {pairs} pairs), "
            f"{cpu:+.0%} by CPU, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
