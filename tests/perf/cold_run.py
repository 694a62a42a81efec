"""Benchmark: a cold ``bedside run`` process, start to exit, against the simulated provider.

Run: python tests/perf/cold_run.py [--latency-ms 200] [--concurrency 100] [--repeat 5]
Builds the 500-case panel, starts ``bedside sim serve --latency-ms L`` once, then runs the ``bedside``
script as a fresh process (a cold interpreter: every import, the dataset loaded and validated, the store
created, the calls, the checkpoints, the final compaction and scores) into a fresh store, ``--repeat``
times, after one unmeasured run (byte code written, page cache warm: the user's environment, whatever
PYTHONDONTWRITEBYTECODE says here). Prints, per run, the process's wall time against the limit 2*N*K*L/C
(K = 1) and how it splits: before the first call (the earliest answer's started_at), the calls (to the
last judgment's finished_at), and after them; its CPU (user + sys, from wait4) and the simulated
server's CPU meanwhile; then the median against the target 1.25 x limit + 1.5 s. The process shares the
machine with the simulated server (and with anything else running): the load average is printed for context.

Beside it, the floor the openai SDK sets, from a fresh interpreter (``--floor``): the CPU of ``import
openai`` and of each of 2*N bare answer calls (the prompts twice; judge calls carry more) made as the
collector makes them (its SDK client, ``post`` and the capped read) and nothing else; a run pays both before
anything of its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BEDSIDE = Path(sys.executable).with_name("bedside")
RATIO, STARTUP_S = 1.25, 1.5  # target: RATIO x the latency limit + STARTUP_S


def _at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def one_run(store: Path, panel_path: Path, base_url: str, concurrency: int, n: int,
            env: dict[str, str]) -> tuple[float, float, float, float]:
    """(process wall seconds, seconds to the first call, seconds from start to the last judgment's end,
    the process's CPU seconds)."""
    from toolkit.store import Store

    argv = [str(BEDSIDE), "run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", base_url,
            "--concurrency", str(concurrency), "--dataset", str(panel_path), "--store", str(store), "--progress", "none"]
    with tempfile.TemporaryFile("w+") as out:
        started = time.time()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - started
        out.seek(0)
        assert os.waitstatus_to_exitcode(status) == 0, out.read()
    opened = Store.open(store)
    answers, judgments = opened.read("answers"), opened.read("judgments")
    assert answers.height == n and judgments.filter(judgments["error"].is_null()).height == n
    first = _at(answers["started_at"].min()) - started
    last = _at(judgments["finished_at"].max()) - started
    return wall, first, last, usage.ru_utime + usage.ru_stime


def floor(base_url: str, panel_path: Path, concurrency: int) -> None:
    """In a fresh interpreter: print the CPU seconds of ``import openai``, then of each of 2*N bare answer calls."""
    cpu0 = time.process_time()
    import openai  # noqa: F401

    imported = time.process_time() - cpu0
    import asyncio
    import json

    import httpx2

    from toolkit import protocol
    from toolkit.collect.client import make_sdk
    from toolkit.collect.settings import RetryPolicy
    from toolkit.collect.wire import read_capped

    prompts = [json.loads(line)["prompt"] for line in panel_path.read_text(encoding="utf-8").splitlines() if line]

    async def calls() -> float:
        policy, gate = RetryPolicy(), asyncio.Semaphore(concurrency)
        sdk = make_sdk(base_url, "none", policy)

        async def one(prompt: str) -> None:
            async with gate:
                body = {"model": "sim/strong", "messages": protocol.answer_messages(prompt),
                        "temperature": protocol.ANSWER_TEMPERATURE,
                        "max_completion_tokens": protocol.ANSWER_MAX_COMPLETION_TOKENS}
                response = await sdk.post("/chat/completions", body=body, cast_to=httpx2.Response, stream=True)
                json.loads(await read_capped(response, 1 << 20, policy.timeout_s))

        await asyncio.gather(*(one(p) for p in prompts[:concurrency]))  # connections opened, not counted
        started = time.process_time()
        await asyncio.gather(*(one(p) for p in prompts * 2))
        spent = (time.process_time() - started) / (2 * len(prompts))
        await sdk.close()
        return spent

    print(json.dumps({"import_s": imported, "call_s": asyncio.run(calls())}))


def sdk_floor(base_url: str, panel_path: Path, concurrency: int, env: dict[str, str]) -> tuple[float, float]:
    """(CPU s of ``import openai``, CPU s per bare call), each the median of three fresh interpreters."""
    import json

    found = [json.loads(subprocess.run([sys.executable, __file__, "--floor", base_url, str(panel_path),
                                        str(concurrency)], capture_output=True, text=True, env=env,
                                       check=True).stdout) for _ in range(3)]
    return (statistics.median(f["import_s"] for f in found), statistics.median(f["call_s"] for f in found))


def main() -> None:
    if sys.argv[1:2] == ["--floor"]:
        return floor(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # imported here: a ``--floor`` child imports nothing before openai
    from tests.perf.collect_throughput import process_cpu
    from tests.perf.panel import build_panel, shared_root
    from tests.perf.rows import row

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        panel_path = build_panel(shared_root(), root)
        n = sum(1 for line in panel_path.read_text(encoding="utf-8").splitlines() if line.strip())
        limit = 2 * n * (args.latency_ms / 1000) / args.concurrency
        target = RATIO * limit + STARTUP_S
        server = subprocess.Popen([str(BEDSIDE), "sim", "serve", "--latency-ms", str(args.latency_ms),
                                   "--dataset", str(panel_path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            print(f"cold `bedside run`: cases {n}, calls {2 * n}, latency {args.latency_ms:.0f} ms, concurrency "
                  f"{args.concurrency}, cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; limit 2*N*K*L/C "
                  f"= {limit:.3f} s, target {RATIO} x limit + {STARTUP_S} s = {target:.2f} s")
            # The user's environment: byte code cached (a developer setting may turn that off here).
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            one_run(root / "store-warm", panel_path, base_url, args.concurrency, n, env)  # unmeasured
            walls, firsts, cpus = [], [], []
            for i in range(args.repeat):
                server0 = process_cpu(server.pid)
                wall, first, last, cpu = one_run(root / f"store-{i}", panel_path, base_url, args.concurrency, n, env)
                walls.append(wall)
                firsts.append(first)
                cpus.append(cpu)
                print(f"run {i + 1}: wall {wall:.3f} s = {first:.3f} s to the first call + {last - first:.3f} s of "
                      f"calls + {wall - last:.3f} s after the last; CPU {cpu:.3f} s, simulated server CPU "
                      f"{process_cpu(server.pid) - server0:.3f} s; load {os.getloadavg()[0]:.2f}")
            imported, per_call = sdk_floor(base_url, panel_path, args.concurrency, env)
            print(f"the openai SDK's floor: import openai {imported:.3f} s CPU + {2 * n} bare answer calls x "
                  f"{1000 * per_call:.3f} ms CPU = {imported + 2 * n * per_call:.3f} s CPU, before anything else")
        finally:
            server.terminate()
            server.wait(timeout=30)
    median = statistics.median(walls)
    print(f"wall best {min(walls):.3f} s, median {median:.3f} s (target <= {target:.2f} s); first call median "
          f"{statistics.median(firsts):.3f} s; CPU median {statistics.median(cpus):.3f} s")
    row(f"cold `bedside run` process, {n} cases, {args.latency_ms:.0f} ms latency, C = {args.concurrency}, "
        f"wall (limit 2NKL/C = {limit:.1f} s)",
        f"{median:.2f} s median of {len(walls)} (best {min(walls):.2f}), first call at "
        f"{statistics.median(firsts):.2f} s, CPU {statistics.median(cpus):.2f} s (the openai SDK's floor "
        f"{imported + 2 * n * per_call:.2f} s), load {os.getloadavg()[0]:.1f}",
        f"<= {RATIO} x {limit:.1f} + {STARTUP_S} = {target:.2f} s", median <= target)


if __name__ == "__main__":
    main()
