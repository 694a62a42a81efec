"""Benchmark: importing 100 reference result files of 500 cases each with one command (issue 11: <= 10 s).

Run: python tests/perf/import_speed.py [--files 100] [--check-runs 20] [--samples 300]

Builds the 500-case panel (tests/perf/panel.py), writes ``--files`` result files with
tests/reference_model.py (as tests/perf/summary_speed.py does: 4 % failed attempts, some retried, a
few cases succeeding twice), then runs ``bedside import DIR`` as a child process and reports its wall
and CPU time (the kernel's accounting of the finished child) and peak RSS. Checks one runs commit per
file, and that ``bedside summary --json`` of the first ``--check-runs`` runs equals the plain reference
algorithm on the same rows (fewer resamples than the default, to keep the check quick).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import reference_model as rm  # noqa: E402
from tests.perf.child import timed  # noqa: E402
from tests.perf.panel import build_panel, shared_root  # noqa: E402
from tests.perf.rows import row  # noqa: E402
from toolkit.dataset import load_dataset  # noqa: E402
from toolkit.store import Store  # noqa: E402

BEDSIDE = Path(sys.executable).with_name("bedside")
TARGET_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--check-runs", type=int, default=20)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        panel_path = build_panel(shared_root(), root)
        panel = load_dataset(panel_path)
        folder = root / "results"
        folder.mkdir()
        rows_of = {}
        for i in range(args.files):
            rows = rm.make_rows(list(panel.raw_cases), seed=100 + i, error_rate=0.04, answer_model=f"model-{i}")
            (folder / f"model-{i:03d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            rows_of[f"model-{i:03d}"] = rows
        store = root / "store"
        code, wall, cpu, peak, output = timed([str(BEDSIDE), "import", str(folder), "--store", str(store),
                                               "--dataset", str(panel_path)])
        if code != 0:
            raise SystemExit(f"import failed ({code}): {output[-2000:]}")
        imported = sum(line.startswith("imported ") for line in output.splitlines())
        runs_commits = len(list((store / "runs" / "_delta_log").glob("*.json"))) - 1  # less the table's creation
        checked = sorted(rows_of)[: args.check_runs]
        got = json.loads(subprocess.run([str(BEDSIDE), "summary", *[a for r in checked for a in ("--run", r)],
                                         "--json", "--samples", str(args.samples), "--store", str(store)],
                                        capture_output=True, text=True, check=True).stdout)
        expected_ids = {c["case_id"] for c in panel.raw_cases}
        identical = all(json.dumps(got[r]) == json.dumps(rm.summarize(rows_of[r], args.samples, 42, expected_ids,
                                                                      panel.sha256)) for r in checked)
        runs = Store.open(store).run_ids()
        print(f"{args.files} files x 500 cases: {imported} imported, {len(runs)} runs, {runs_commits} runs commits; "
              f"peak RSS {peak:.0f} MB; {cpu / args.files * 1000:.0f} ms CPU a file")
        print(f"summary --json of {len(checked)} runs identical to the plain reference algorithm "
              f"({args.samples} resamples): {identical}")
        ok = identical and imported == len(runs) == runs_commits == args.files
        row(f"import of {args.files} result files x 500 cases, one command", f"{wall:.1f} s wall, {cpu:.1f} s CPU",
            f"<= {TARGET_S:.0f} s wall", ok and wall <= TARGET_S)
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
