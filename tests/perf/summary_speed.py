"""Benchmark: summarise 20 runs x 500 cases with the toolkit vs the plain reference algorithm.

Run: python tests/perf/summary_speed.py [--runs 20] [--reference-runs 20]
Prints import time, summary time of both, the ratio (target >= 20x) and peak memory,
and checks that every number is identical.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import reference_model as rm  # noqa: E402
from tests.perf.panel import build_panel, shared_root  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.reference import import_reference, read_result_rows  # noqa: E402
from toolkit.store import Store  # noqa: E402
from toolkit.summary import SummaryOptions, summarize  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reference-runs", type=int, default=None, help="time the reference on fewer runs and scale")
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
        t0 = time.perf_counter()
        for i, path in enumerate(files):
            import_reference(store, path, panel, f"model-{i}")
        import_s = time.perf_counter() - t0
        ids = [f"model-{i}" for i in range(args.runs)]
        t0 = time.perf_counter()
        ours = summarize(store, ids, SummaryOptions(order="reference"))
        ours_s = time.perf_counter() - t0
        n_ref = args.reference_runs or args.runs
        expected_ids = {c["case_id"] for c in panel.raw_cases}
        t0 = time.perf_counter()
        reference = {}
        for i, path in enumerate(files[:n_ref]):
            rows = [r for _, r in read_result_rows(path)]
            reference[f"model-{i}"] = rm.summarize(rows, 10_000, 42, expected_ids, panel.sha256)
        ref_s = (time.perf_counter() - t0) * args.runs / n_ref
        identical = all(json.dumps(ours[k]) == json.dumps(v) for k, v in reference.items())
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"runs: {args.runs} x 500 cases, 10,000 resamples, seed 42")
        print(f"import of {args.runs} reference files: {import_s:.2f} s")
        print(f"toolkit summary ({args.runs} runs): {ours_s:.2f} s")
        scaled = "" if n_ref == args.runs else f" (measured on {n_ref} runs, scaled)"
        print(f"plain reference algorithm ({args.runs} runs): {ref_s:.2f} s{scaled}")
        print(f"speed-up: {ref_s / ours_s:.1f}x (target >= 20x)")
        print(f"numbers identical on {len(reference)} runs: {identical}")
        print(f"peak memory (max RSS): {peak_mb:.0f} MB")
        if not identical:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
