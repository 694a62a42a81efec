"""Benchmark: the cost of reading result files strictly (finite numbers, 64-bit integers, bounded
nesting, UTF-8-storable text) against plain ``json.loads``.

Run: python tests/perf/strict_json.py [--rows 60000]
Prints MB, rows, the best-of-three time of each and the overhead (target: at most +100%).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import reference_model as rm  # noqa: E402
from tests.perf import rows as perf_rows  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.reference._stream import Problems, iter_result_rows  # noqa: E402

TARGET = 1.0  # at most double: a Python call per number (parsing is a small part of an import)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=60_000)
    args = parser.parse_args()
    cases = list(load_dataset().raw_cases)
    rows: list[dict] = []
    while len(rows) < args.rows:
        rows += rm.make_rows(cases, seed=len(rows), error_rate=0.05)
    for row in rows:  # answers of a realistic length (~3.5 kB)
        if "answer" in row:
            row["answer"] = "Start apixaban 5 mg twice daily; reassess renal function in 3 months. " * 50
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[: args.rows]), encoding="utf-8")
        size = path.stat().st_size / 1e6
        plain_s, strict_s = float("inf"), float("inf")
        for _ in range(3):  # best of three: the machine is shared
            start = time.perf_counter()
            plain = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            plain_s = min(plain_s, time.perf_counter() - start)
            start = time.perf_counter()
            problems = Problems()
            strict = [(number, row) for number, row, _ in iter_result_rows(path, problems)]
            assert not problems.count, problems.error()
            strict_s = min(strict_s, time.perf_counter() - start)
    assert [r for _, r in strict] == plain
    overhead = strict_s / plain_s - 1
    print(f"{size:.0f} MB, {len(plain)} rows: json.loads {plain_s:.2f} s, strict reader {strict_s:.2f} s, "
          f"overhead {overhead:+.0%} (target <= {TARGET:.0%}) {'OK' if overhead <= TARGET else 'MISSED'}")
    perf_rows.row(f"strict reading of a {size:.0f} MB result file vs json.loads",
                  f"{overhead:+.0%} ({strict_s:.2f} s vs {plain_s:.2f} s, best of 3)", f"<= +{TARGET:.0%}",
                  overhead <= TARGET)


if __name__ == "__main__":
    main()
