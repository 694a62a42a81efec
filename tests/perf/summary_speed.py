"""Benchmark: `bedside summary --all --order reference` on 20 imported runs x 500 cases, as a user runs
it (a fresh process: interpreter start, imports, reading the store, the bootstrap, the tables), against
the plain reference algorithm (tests/reference_model.py) on the same result files.

Run: python tests/perf/summary_speed.py [--runs 20] [--reference-runs 20] [--cold-runs 5]

Builds the 500-case panel (tests/perf/panel.py), writes ``--runs`` reference result files and imports
them into a store in a temporary directory. Then, in one run of this script:
- the cold command ``--cold-runs`` times (after one unmeasured run, which writes the byte-code caches a
  user's second run finds, and the resample-index cache, toolkit/bootstrap/_cache.py, in a directory of this
  script's own): wall and CPU (user + sys of the child) of each, median quoted;
- the same with that index cache cold (a fresh, empty cache directory each run: the first command on a
  dataset of these sizes, which also writes the cache) and with it off (BEDSIDE_CACHE_DIR=off);
- the reference algorithm on ``--reference-runs`` files (scaled to ``--runs`` when fewer): wall and CPU;
- the in-process summary (``toolkit.summarize``), for the split between start-up and the work itself.
Checks that the command's ``--json`` numbers equal the reference's, run by run, and prints the ratio
reference / cold command (target >= 25x), by wall and by CPU: CPU is the figure a busy machine moves
least; one ROW per cache state (the target is checked on the warm cache: a user's usual command). The
load average is printed for context.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import reference_model as rm  # noqa: E402
from tests.perf.panel import build_panel, shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.reference import import_reference  # noqa: E402
from toolkit.reference._stream import Problems, iter_result_rows  # noqa: E402
from toolkit.store import Store  # noqa: E402
from toolkit.summary import SummaryOptions, summarize  # noqa: E402

TARGET_RATIO = 25.0
BEDSIDE = [sys.executable, "-m", "toolkit"]


def child_env() -> dict[str, str]:
    """The user's environment: byte code cached (a developer setting may turn it off here)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall, CPU of the child, stdout) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reference-runs", type=int, default=None, help="time the reference on fewer runs and scale")
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        panel = load_dataset(build_panel(shared_root(), root))
        assert len(panel.raw_cases) == 500
        files = []
        for i in range(args.runs):
            rows = rm.make_rows(list(panel.raw_cases), seed=100 + i, error_rate=0.04, answer_model=f"model-{i}")
            path = root / f"model-{i}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            files.append(path)
        store = Store.open(root / "store")
        for i, path in enumerate(files):
            import_reference(store, path, panel, f"model-{i}")
        ids = [f"model-{i}" for i in range(args.runs)]
        print(f"runs: {args.runs} x 500 cases, 10,000 resamples, seed 42; cpus {os.cpu_count()}, "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)

        argv = [*BEDSIDE, "summary", "--all", "--order", "reference", "--store", str(root / "store")]
        env = {**child_env(), "BEDSIDE_CACHE_DIR": str(root / "cache")}  # never the user's own cache
        timed(argv, env)  # unmeasured: byte code written, page cache warm, as for a user's second command
        medians = {}
        for state in ("warm", "cold", "off"):
            walls, cpus = [], []
            for i in range(args.cold_runs):
                fresh = root / f"cache-{state}-{i}"
                run_env = env if state == "warm" else {**env, "BEDSIDE_CACHE_DIR": "off" if state == "off"
                                                       else str(fresh)}
                wall, cpu, _ = timed(argv, run_env)
                shutil.rmtree(fresh, ignore_errors=True)  # outside the measured command
                walls.append(wall)
                cpus.append(cpu)
            medians[state] = statistics.median(walls), statistics.median(cpus)
            print(f"cold `bedside summary --all --order reference`, index cache {state}: wall median "
                  f"{medians[state][0]:.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), CPU median "
                  f"{medians[state][1]:.2f} s", flush=True)
        outputs = {state: timed([*argv, "--json"], {**env, "BEDSIDE_CACHE_DIR": cache})[2]
                   for state, cache in (("warm", str(root / "cache")), ("off", "off"))}
        cold_json = json.loads(outputs["warm"])

        t0 = time.perf_counter()
        ours = summarize(store, ids, SummaryOptions(order="reference"))
        ours_s = time.perf_counter() - t0
        print(f"in-process summary (no start-up, warm imports): {ours_s:.2f} s", flush=True)

        n_ref = args.reference_runs or args.runs
        expected_ids = {c["case_id"] for c in panel.raw_cases}
        cpu0, t0 = time.process_time(), time.perf_counter()
        reference = {}
        for i, path in enumerate(files[:n_ref]):
            rows = [r for _, r, _ in iter_result_rows(path, Problems())]
            reference[f"model-{i}"] = rm.summarize(rows, 10_000, 42, expected_ids, panel.sha256)
        ref_s = (time.perf_counter() - t0) * args.runs / n_ref
        ref_cpu = (time.process_time() - cpu0) * args.runs / n_ref
        scaled = "" if n_ref == args.runs else f" (measured on {n_ref} runs, scaled)"
        print(f"plain reference algorithm ({args.runs} runs): {ref_s:.2f} s wall, {ref_cpu:.2f} s CPU{scaled}")

        identical = all(json.dumps(ours[k]) == json.dumps(v) for k, v in reference.items())
        cold_identical = all(cold_json[k] == json.loads(json.dumps(v)) for k, v in reference.items()) and \
            outputs["warm"] == outputs["off"]
        print(f"numbers identical on {len(reference)} runs: in process {identical}, cold command {cold_identical}")
        print(f"peak memory of this process (max RSS): "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
        for state, what in (("warm", "index cache warm"), ("cold", "index cache cold (first run of these sizes)"),
                            ("off", "index cache off")):
            wall, cpu = medians[state]
            ratio, cpu_ratio = ref_s / wall, ref_cpu / cpu
            row(f"bedside summary --all --order reference, {args.runs} imported runs x 500 cases, cold, {what}, "
                "vs reference",
                f"{ratio:.1f}x by wall ({wall:.2f} s vs {ref_s:.1f} s), {cpu_ratio:.1f}x by CPU "
                f"({cpu:.2f} s vs {ref_cpu:.1f} s), load {os.getloadavg()[0]:.1f}",
                f">= {TARGET_RATIO:.0f}x, numbers identical" if state == "warm" else "(context: warm is the target)",
                (ratio >= TARGET_RATIO or state != "warm") and identical and cold_identical)
        if not (identical and cold_identical):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
