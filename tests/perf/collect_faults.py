"""Benchmark: collecting through a faulty provider, against the same provider with its timeouts alone.

Run: python tests/perf/collect_faults.py [--cases 250] [--latency-ms 100] [--concurrency 32] [--hold-s 30]
Starts ``bedside sim serve`` three times on the public split (250 cases) as a subprocess, each time
collecting answers and one judge pass per case with the real collector and the CLI's default retry settings:

0. fault-free (for context);
1. timeouts only: 2 % of calls held ``--hold-s`` seconds, then answered 504;
2. every fault: the same timeouts plus 20 % 429 (Retry-After), 5 % 5xx and 5 % broken judge JSON.

Prints each wall time, the faults the provider injected, the cases completed and the ratio full/timeouts
(target <= 2). The goal (issue 11): the controller neither collapses under 429s it cannot avoid nor lets a
held call stop the others. The client shares the machine with the server: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.perf.panel import shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.collect.judge import case_to_judge  # noqa: E402
from toolkit.collect.plan import ensure_run  # noqa: E402
from toolkit.collect.runner import CollectJob, collect  # noqa: E402
from toolkit.collect.settings import CollectSettings, Endpoint  # noqa: E402
from toolkit.dataset import Dataset, load_dataset  # noqa: E402
from toolkit.store import Store  # noqa: E402

BEDSIDE = Path(sys.executable).with_name("bedside")
TIMEOUTS = ("--rate-timeout", "0.02")
EVERYTHING = (*TIMEOUTS, "--rate-429", "0.2", "--rate-5xx", "0.05", "--rate-bad-json", "0.05")


def one_run(root: Path, dataset: Dataset, dataset_path: Path, cases: int, latency_ms: float, concurrency: int,
            hold_s: float, faults: tuple[str, ...]) -> dict:
    import json
    import urllib.request

    server = subprocess.Popen([str(BEDSIDE), "sim", "serve", "--latency-ms", str(latency_ms), "--dataset",
                               str(dataset_path), "--timeout-hold-s", str(hold_s), "--seed", "11", *faults],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        endpoint = Endpoint("sim", base_url, ())
        settings = CollectSettings("perf", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=concurrency)
        job = CollectJob(settings, tuple(case_to_judge(c) for c in dataset.raw_cases[:cases]))
        store = Store.open(root)
        store.write_dataset(dataset)
        t0 = time.perf_counter()
        [report] = collect(store, [job], prepare=lambda s, j: ensure_run(s, j.settings, dataset.sha256))
        wall = time.perf_counter() - t0
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as reply:
            stats = json.loads(reply.read())["chat_completions"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {"wall": wall, "answers_ok": report.answers_ok, "judgments_ok": report.judgments_ok,
            "faults": {k: v for k, v in stats["faults"].items() if v}, "received": stats["received"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=250)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--hold-s", type=float, default=30.0)
    args = parser.parse_args()
    dataset_path = shared_root()
    dataset = load_dataset(dataset_path)
    n = min(args.cases, len(dataset.raw_cases))
    print(f"cases {n}, latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}, holds {args.hold_s:g} s, "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    walls = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, faults in (("fault-free", ()), ("timeouts only", TIMEOUTS), ("every fault", EVERYTHING)):
            result = one_run(Path(tmp) / name.replace(" ", "-"), dataset, dataset_path, n, args.latency_ms,
                             args.concurrency, args.hold_s, faults)
            walls[name] = result["wall"]
            print(f"{name}: wall {result['wall']:.2f} s, answers ok {result['answers_ok']}/{n}, judgments ok "
                  f"{result['judgments_ok']}/{n}, requests {result['received']}, injected {result['faults']}")
    ratio = walls["every fault"] / walls["timeouts only"]
    print(f"ratio every fault / timeouts only {ratio:.2f} (target <= 2)")
    row(f"collect {n} cases, {args.latency_ms:.0f} ms latency, C = {args.concurrency}, every fault vs timeouts only",
        f"{ratio:.2f} ({walls['every fault']:.1f} s vs {walls['timeouts only']:.1f} s; fault-free "
        f"{walls['fault-free']:.1f} s), load {os.getloadavg()[0]:.1f}", "<= 2", ratio <= 2)


if __name__ == "__main__":
    main()
