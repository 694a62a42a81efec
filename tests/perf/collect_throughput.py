"""Benchmark: collection throughput against the simulated provider with a fixed latency.

Run: python tests/perf/collect_throughput.py [--latency-ms 200] [--concurrency 100] [--repeat 3] [--answer-samples 5]
Builds the 500-case panel, starts ``bedside sim serve --latency-ms L`` as a subprocess and collects
answers + judgments (2 x 500 calls) with the real collector into a fresh store, ``--repeat`` times
(each on a fresh store and a fresh server). Prints, per repeat, the wall time of ``collect`` (lock,
journal recovery, every call, the checkpoints and the final compaction), the ideal 2*N*L/C, their
ratio (target <= 1.25) and client CPU seconds per call, then the best and the median; checks that each
store holds exactly one answer and one valid judgment per case. The client shares the machine with the
simulated server (and with anything else running): the load average is printed for context.

A second row collects ``--answer-samples`` K answers per case (each judged) on the 250-case public split:
the ideal is then 2*N*K*L/C, with the same target ratio (the calls of a case's samples run side by side).
Both rows time ``collect`` inside this process, start-up excluded; tests/perf/cold_run.py times a whole cold
``bedside run`` process, start-up included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.perf.panel import build_panel, shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.collect.judge import case_to_judge  # noqa: E402
from toolkit.collect.plan import ensure_run  # noqa: E402
from toolkit.collect.runner import CollectJob, collect  # noqa: E402
from toolkit.collect.settings import CollectSettings, Endpoint  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.store import Store  # noqa: E402

BEDSIDE = Path(sys.executable).with_name("bedside")
TARGET_RATIO = 1.25


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(root: Path, panel_path: Path, panel, latency_ms: float, concurrency: int,
            samples: int = 1) -> tuple[float, float, float]:
    """(wall seconds, client CPU seconds, simulated server's CPU seconds) of one collection into a fresh store."""
    n = len(panel.raw_cases) * samples
    server = subprocess.Popen([str(BEDSIDE), "sim", "serve", "--latency-ms", str(latency_ms),
                               "--dataset", str(panel_path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        endpoint = Endpoint("sim", base_url, ())
        settings = CollectSettings("perf", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=concurrency,
                                   answer_samples=samples)
        job = CollectJob(settings, tuple(case_to_judge(c) for c in panel.raw_cases))
        store = Store.open(root)
        store.write_dataset(panel)
        server0, cpu0, t0 = process_cpu(server.pid), time.process_time(), time.perf_counter()
        [report] = collect(store, [job], prepare=lambda s, j: ensure_run(s, j.settings, panel.sha256))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        server_cpu = process_cpu(server.pid) - server0
    finally:
        server.terminate()
        server.wait(timeout=30)
    answers, judgments = store.read("answers"), store.read("judgments")
    assert report.answers_ok == n and report.judgments_ok == n, report
    assert answers.height == n and judgments.filter(judgments["error"].is_null()).height == n
    return wall, cpu, server_cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--answer-samples", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        panel_path = build_panel(shared_root(), root)
        panel = load_dataset(panel_path)
        n = len(panel.raw_cases)
        calls = 2 * n
        ideal = 2 * n * (args.latency_ms / 1000) / args.concurrency
        print(f"cases {n}, calls {calls}, latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}, "
              f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; ideal 2*N*L/C = {ideal:.3f} s")
        ratios, cpus = [], []
        for i in range(args.repeat):
            wall, cpu, server_cpu = one_run(root / f"store-{i}", panel_path, panel, args.latency_ms, args.concurrency)
            ratios.append(wall / ideal)
            cpus.append(cpu)
            print(f"run {i + 1}: wall {wall:.3f} s, ratio {wall / ideal:.3f}, client CPU {cpu:.3f} s = "
                  f"{1000 * cpu / calls:.3f} ms per call, simulated server CPU {server_cpu:.3f} s = "
                  f"{1000 * server_cpu / calls:.3f} ms per call")
        print(f"ratio best {min(ratios):.3f}, median {statistics.median(ratios):.3f} (target <= 1.25)")
        median = statistics.median(ratios)
        row(f"collect {n} cases (answer + judge), {args.latency_ms:.0f} ms latency, C = {args.concurrency}, "
            f"wall / ideal 2NL/C", f"{median:.2f} median of {len(ratios)} (best {min(ratios):.2f}), "
            f"client CPU {1000 * statistics.median(cpus) / calls:.2f} ms a call, load {os.getloadavg()[0]:.1f}",
            f"<= {TARGET_RATIO}", median <= TARGET_RATIO)
        samples_row(root, args.latency_ms, args.concurrency, args.repeat, args.answer_samples)


def samples_row(root: Path, latency_ms: float, concurrency: int, repeat: int, samples: int) -> None:
    """K answers per case on the public split: wall / ideal 2*N*K*L/C."""
    public_path = shared_root()
    public = load_dataset(public_path)
    n = len(public.raw_cases)
    calls = 2 * n * samples
    ideal = calls * (latency_ms / 1000) / concurrency
    print(f"cases {n}, answer samples {samples}, calls {calls}; ideal 2*N*K*L/C = {ideal:.3f} s")
    ratios = []
    for i in range(repeat):
        wall, cpu, _ = one_run(root / f"samples-{i}", public_path, public, latency_ms, concurrency, samples)
        ratios.append(wall / ideal)
        print(f"run {i + 1}: wall {wall:.3f} s, ratio {wall / ideal:.3f}, "
              f"client CPU {1000 * cpu / calls:.3f} ms a call")
    median = statistics.median(ratios)
    row(f"collect {n} cases x {samples} answer samples (each judged), {latency_ms:.0f} ms latency, "
        f"C = {concurrency}, wall / ideal 2NKL/C", f"{median:.2f} median of {len(ratios)} (best {min(ratios):.2f}), "
        f"load {os.getloadavg()[0]:.1f}", f"<= {TARGET_RATIO}", median <= TARGET_RATIO)


if __name__ == "__main__":
    main()
