"""Benchmark: a store of 1,000 runs x 250 cases (issue 21, item 4), built with ``bedside import DIR``.

Run: python tests/perf/thousand_runs.py --data /work/scale-data/thousand [--runs 1000] [--select 100] [--reuse]

Writes ``--runs`` reference-format result files over the 250 public cases (tests/reference_model.py, one
answer model each) into DATA/results, imports the folder into DATA/store in one command, then times what a
user waits for, each a fresh process (wall, CPU and the child's peak RSS from wait4):
- ``bedside runs`` (the listing of every run);
- ``bedside compare`` of ``--select`` runs chosen by a pattern (``--run 'model-0*'``);
- ``bedside summary`` of the same runs;
- ``bedside report`` of the same runs (figures included);
- ``bedside runs compact`` (then the listing again).
``--reuse`` keeps a store built earlier under DATA; ``--only runs,compare,summary`` times the steps that only read
it (a shared store stays untouched). One ROW per target; the store lives outside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import reference_model as rm  # noqa: E402
from tests.perf.child import timed  # noqa: E402
from tests.perf.panel import shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402

BEDSIDE = [sys.executable, "-m", "toolkit"]
TARGETS = {"import": 120.0, "runs": 1.0, "compare": 3.0, "summary": 5.0, "report": 60.0}
MEMORY_MB = 2048
STEPS = ("runs", "compare", "summary", "report", "compact")


def write_results(folder: Path, runs: int) -> None:
    """``runs`` result files of the 250 public cases, one answer model each (``model-0000`` ...)."""
    cases = list(load_dataset(shared_root()).raw_cases)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(runs):
        rows = rm.make_rows(cases, seed=1000 + i, error_rate=0.02, answer_model=f"model-{i:04d}")
        (folder / f"model-{i:04d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def command(name: str, args: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak MB, output) of ``bedside ARGS``; a failure stops the benchmark with its output."""
    code, wall, cpu, peak, output = timed([*BEDSIDE, *args])
    if code != 0:
        raise SystemExit(f"{name} failed ({code}): {output[-2000:]}")
    return wall, cpu, peak, output


def log_entries(store: Path) -> tuple[int, int]:
    """(data files on disk, log entries a reader replays: each table's commits since its last checkpoint)."""
    from toolkit.store import delta
    from toolkit.store.maintenance import _last_checkpoint

    files = sum(1 for p in store.glob("*/**/*.parquet") if "_delta_log" not in p.parts)
    tables = [t for t in store.iterdir() if (t / "_delta_log").is_dir()]
    replayed = sum(delta.latest_version(t) - _last_checkpoint(t) for t in tables)
    return files, replayed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a folder outside the repository")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--select", type=int, default=100, help="runs compared, summarised and reported")
    parser.add_argument("--reuse", action="store_true", help="keep a store built earlier under --data")
    parser.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps among {', '.join(STEPS)} "
                        "(runs, compare and summary only read the store; report writes under --data, compact "
                        "rewrites the store)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(STEPS):
        raise SystemExit(f"--only: unknown step(s) {', '.join(sorted(only - set(STEPS)))}")
    if ROOT in args.data.resolve().parents:
        raise SystemExit("--data must be outside the repository")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    results, store = args.data / "results", args.data / "store"
    if not (args.reuse and store.is_dir()):
        shutil.rmtree(args.data, ignore_errors=True)
        t0 = time.perf_counter()
        write_results(results, args.runs)
        print(f"wrote {args.runs} result files x 250 cases in {time.perf_counter() - t0:.1f} s")
        wall, cpu, peak, _ = command("import", ["import", str(results), "--store", str(store), "--dataset",
                                                str(shared_root())])
        row(f"bedside import DIR of {args.runs} result files x 250 cases", f"{wall:.1f} s wall, {cpu:.1f} s CPU, "
            f"peak {peak:.0f} MB", f"<= {TARGETS['import']:.0f} s", wall <= TARGETS["import"])
    from toolkit.store import Store

    total = len(Store.open(store).run_ids())
    digits = len(str(args.select - 1))
    pattern = "model-" + "0" * (4 - digits) + "?" * digits  # the first --select runs: model-00?? for 100
    chosen = ["--run", pattern, "--store", str(store)]
    print(f"store: {total} runs x 250 cases; selection {pattern!r} (--select {args.select})")
    args.runs = total
    files, commits = log_entries(store)
    print(f"before compaction: {files} data files on disk, {commits} log entries to replay (all tables)")
    peaks = {}
    for name, extra in (("runs", ["runs", "--store", str(store)]),
                        ("compare", ["compare", *chosen]),
                        ("summary", ["summary", *chosen]),
                        ("report", ["report", *chosen, "--out", str(args.data / "report")])):
        if name not in only:
            continue
        wall, cpu, peak, output = command(name, extra)
        peaks[name] = peak
        what = f"bedside {name}" + ("" if name == "runs" else f" of {args.select} runs")
        row(f"{what}, store of {args.runs} runs x 250 cases, cold", f"{wall:.2f} s wall, {cpu:.2f} s CPU, "
            f"peak {peak:.0f} MB, load {os.getloadavg()[0]:.1f}", f"<= {TARGETS[name]:g} s", wall <= TARGETS[name])
    if "report" in only and (args.data / "report" / "index.html").is_file():
        size = (args.data / "report" / "index.html").stat().st_size / 1e6
        print(f"report: index.html {size:.2f} MB")
    if peaks:
        worst = max(peaks.values())
        row(f"peak memory of {'/'.join(peaks)}, {args.runs} runs", f"{worst:.0f} MB ({max(peaks, key=peaks.get)})",
            f"<= {MEMORY_MB} MB", worst <= MEMORY_MB)
    if "compact" not in only:
        return
    wall, cpu, peak, _ = command("compact", ["runs", "compact", "--store", str(store)])
    after_files, after_commits = log_entries(store)
    print(f"compact: {wall:.1f} s; {files} -> {after_files} data files on disk, {commits} -> {after_commits} log "
          "entries to replay")
    wall, cpu, peak, _ = command("runs", ["runs", "--store", str(store)])
    row(f"bedside runs after compaction, {args.runs} runs", f"{wall:.2f} s wall, {cpu:.2f} s CPU",
        f"<= {TARGETS['runs']:g} s", wall <= TARGETS["runs"])


if __name__ == "__main__":
    main()
