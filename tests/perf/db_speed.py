"""Benchmark: `bedside db --out FILE` and the database file's views on a store of simulated runs over the
public split (250 cases), and what the refresh of a registered file adds to a store write.

Run: python tests/perf/db_speed.py [--runs 20] [--passes 3]

Writes ``--runs`` simulated runs (``--passes`` judge passes each) into a store in a temporary directory,
then measures:
- the cold command `bedside db --out FILE` (a fresh process: start-up, views, the bootstrap intervals);
- each derived view read whole from the file by a fresh read-only DuckDB connection (planning included);
- one store write (a small run's commit) without and with a registered database file (the refresh hook).
Checks that the file's benchmark and overall means equal ``toolkit.summarize``'s bit for bit.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import analysis_sim  # noqa: E402
from tests.perf.panel import shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.store import Store  # noqa: E402
from toolkit.summary import summarize  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    import duckdb

    dataset = load_dataset(shared_root())
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "store")
        for k in range(args.runs):
            analysis_sim.write_run(store, dataset, f"run{k:02d}", -1.0 + 2.0 * k / args.runs, k,
                                   passes=args.passes, created=k)
        out = Path(tmp) / "results.duckdb"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "toolkit", "db", "--out", str(out), "--store", str(store.root)],
                       check=True, capture_output=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        cases = dataset.cases.height
        row(f"bedside db, {args.runs} runs x {cases} cases x {args.passes} passes, cold",
            f"{wall:.2f} s wall, {cpu:.2f} s CPU", "<= 10 s", wall <= 10)
        for view in ("pass_scores", "case_scores", "benchmark_scores", "run_summary"):
            con = duckdb.connect(str(out), read_only=True)
            t0 = time.perf_counter()
            n = len(con.execute(f"SELECT * FROM {view}").fetchall())
            took = time.perf_counter() - t0
            con.close()
            row(f"SELECT * FROM {view} in the file ({n} rows), fresh connection", f"{took:.2f} s", "<= 2 s",
                took <= 2)
        summaries = summarize(store, store.run_ids())
        con = duckdb.connect(str(out), read_only=True)
        overall = dict(con.execute("SELECT run_id, overall_macro_mean FROM run_summary").fetchall())
        means = {(r, b): m for r, b, m in con.execute("SELECT run_id, benchmark, mean FROM benchmark_scores").fetchall()}
        con.close()
        exact = all(overall[r] == s["overall_macro_mean"] and all(means[(r, b)] == x["mean"]
                                                                 for b, x in s["benchmarks"].items())
                    for r, s in summaries.items())
        row("file's means equal toolkit.summarize", "bit for bit" if exact else "DIFFER", "bit for bit", exact)
        small = dataset.cases["case_id"].to_list()[:5]
        failed = frozenset(dataset.cases["case_id"].to_list()[5:])
        walls = {}
        for label, registered in (("no database", False), ("a registered database", True)):
            if not registered:
                (store.root / ".databases.json").rename(Path(tmp) / "registry")
            else:
                (Path(tmp) / "registry").rename(store.root / ".databases.json")
            t0 = time.perf_counter()
            analysis_sim.write_run(store, dataset, f"small-{label}", 0.0, 99, failed=failed, created=99)
            walls[label] = time.perf_counter() - t0
            print(f"a 4-commit write (runs, answers, judgments, decisions) of {len(small)} cases with {label}: {walls[label]:.2f} s")
        extra = (walls["a registered database"] - walls["no database"]) / 4
        row("refresh of a registered file, per store commit", f"{extra:.2f} s", "<= 0.5 s", extra <= 0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
