"""Exactly one ``runs`` row per run whatever was collected, judged or re-judged; every step's settings kept."""

from __future__ import annotations

import json
from pathlib import Path

from tests.collect_support import bedside
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.store import Store

RUN = "sim/strong"


def test_smoke_then_full_run_then_another_judge_leave_one_runs_row_with_every_step(tmp_path: Path) -> None:
    st = tmp_path / "store"
    n = len(load_dataset(None).raw_cases)
    with SimServer(SimConfig(seed=2)) as sim:
        base = ["--answer-model", RUN, "--judge-model", "sim/judge", "--base-url", sim.base_url, "--store", st,
                "--progress", "none"]
        assert bedside("run", *base, "--limit", "3")[0] == 0
        assert bedside("run", *base)[0] == 0
        code, _, err = bedside("judge", "--run", RUN, "--judge-model", "sim/judge-notemp", "--judge-base-url",
                               sim.base_url, "--store", st, "--progress", "none")
        assert code == 0, err
    store = Store.open(st)
    runs = store.read("runs")
    assert runs.height == 1 and runs["run_id"].to_list() == [RUN]
    row = store.run(RUN)
    settings = json.loads(row["settings"])
    assert settings["selection"]["cases"] == n and settings["selection"]["limit"] is None  # the latest step's
    assert "sim/judge-notemp" in settings["additional_judges"]
    steps = json.loads(row["steps"])
    assert [s["kind"] for s in steps] == ["run", "run", "judge"]
    assert steps[0]["settings"]["selection"]["limit"] == 3  # the smoke step is kept, not overwritten
    assert steps[2]["judge_model"] == "sim/judge-notemp"
    judges = store.read("judgments").group_by("judge_model").len().sort("judge_model")
    assert judges.rows() == [("sim/judge", n), ("sim/judge-notemp", n)]
    assert row["created_at"] <= row["updated_at"]
