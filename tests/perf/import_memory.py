"""Benchmark: importing one large reference result file (issue 11: 200k rows, ~450 MB took 34 s and 4.2 GB).

Run: python tests/perf/import_memory.py [--rows 200000] [--answer-chars 1000] [--samples 1000] [--keep DIR]

Writes a valid result file of ``--rows`` rows in a temporary directory (the public split's 250 cases,
simulated by tests/reference_model.py over and over with a ~1 kB answer each, so most cases are answered
many times: later successes supersede earlier ones, as in a file several reruns appended to), then runs
``bedside import FILE`` as a child process and reports its peak RSS (the kernel's accounting of the
finished child), wall and CPU time. Checks that the imported run's ``bedside summary --json`` equals the
plain reference algorithm on the same rows. Targets: peak <= 1 GB whatever the size; wall <= 34 s for
200k rows (the issue's figure for the old whole-file import on this machine), in proportion for others.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import reference_model as rm  # noqa: E402
from tests.perf.child import timed  # noqa: E402
from tests.perf.panel import shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402

BEDSIDE = Path(sys.executable).with_name("bedside")
PEAK_TARGET_MB = 1024
WALL_TARGET_S = 34.0


def write_file(path: Path, cases: list[dict], rows: int, answer_chars: int) -> list[dict]:
    """The result file, and its rows as the reference reads them (for the oracle summary: only the fields it
    uses are kept, so this process stays small too)."""
    padding = ("Start apixaban 5 mg twice daily; reassess renal function in three months. " * 40)[:answer_chars]
    kept: list[dict] = []
    with open(path, "w", encoding="utf-8") as handle:
        seed = 0
        while len(kept) < rows:
            for r in rm.make_rows(cases, seed=seed, error_rate=0.05)[: rows - len(kept)]:
                if "answer" in r:
                    r["answer"] = f"{r['answer']} ({seed}): {padding}"
                handle.write(json.dumps(r, ensure_ascii=False) + "\n")
                kept.append({k: r.get(k) for k in ("case_id", "benchmark", "score", "error", "answer_model",
                                                   "judge_model", "answer_temperature", "judge_temperature",
                                                   "started_at", "finished_at") if k in r})
            seed += 1
    return kept


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--answer-chars", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of the checked summary")
    parser.add_argument("--keep", type=Path, default=None, help="write the file and store here and keep them")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="import-memory-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    try:
        dataset_dir = shared_root()
        dataset = load_dataset(dataset_dir)
        path, store = root / "big.jsonl", root / "store"
        start = time.perf_counter()
        kept = write_file(path, list(dataset.raw_cases), args.rows, args.answer_chars)
        size_mb = path.stat().st_size / 1e6
        print(f"wrote {args.rows} rows, {size_mb:.0f} MB in {time.perf_counter() - start:.1f} s")
        shutil.rmtree(store, ignore_errors=True)
        code, wall, cpu, peak, output = timed([str(BEDSIDE), "import", str(path), "--run-id", "big", "--store",
                                               str(store), "--dataset", str(dataset_dir)])
        print(output.strip()[-400:])
        if code != 0:
            raise SystemExit(f"import failed ({code})")
        got = subprocess.run([str(BEDSIDE), "summary", "--run", "big", "--json", "--samples", str(args.samples),
                              "--store", str(store)], capture_output=True, text=True, check=True).stdout
        expected = rm.summarize(kept, args.samples, 42, {c["case_id"] for c in dataset.raw_cases}, dataset.sha256)
        identical = json.dumps(json.loads(got)["big"]) == json.dumps(expected)
        print(f"summary --json identical to the plain reference algorithm: {identical}")
        what = f"import of one {args.rows // 1000}k-row result file ({size_mb:.0f} MB)"
        row(f"{what}, peak RSS", f"{peak:.0f} MB", f"<= {PEAK_TARGET_MB} MB", peak <= PEAK_TARGET_MB and identical)
        # The figure for a file of this many rows (never below a command's start-up, for tiny --rows).
        target = max(1.0, WALL_TARGET_S * args.rows / 200_000)
        row(f"{what}, time", f"{wall:.1f} s wall, {cpu:.1f} s CPU", f"<= {target:.3g} s wall",
            wall <= target and identical)
        if not identical:
            raise SystemExit(1)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
