"""A small store for the report tests: three simulated runs on the bundled sample, one with a hostile
run id, hostile answers, prompts and rubric texts, two judge passes on one run and failed cases on another."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl

from tests.analysis_sim import simulate_decisions
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.store import Store

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'
EVIL_RUN = 'evil $\\frac{1}{$ <img src=x onerror="window.__pwned=3">'  # "$": TeX math to matplotlib
ANSWER = f"Start with {SCRIPT} then {IMG} and a fence ```` inside | a | pipe"
RUNS = (("alpha", 1.2, 1, frozenset()), ("beta", 0.4, 2, frozenset()), (EVIL_RUN, -0.6, 1, None))


def hostile_dataset(dataset):
    """The sample with every prompt and rubric text carrying the payloads (digest kept: the store keys on it)."""
    items = dataset.rubric_items.with_columns(text=pl.col("text") + f" {IMG} {SCRIPT}")
    cases = dataset.cases.with_columns(prompt=pl.col("prompt") + f" {SCRIPT}")
    return dataclasses.replace(dataset, rubric_items=items, cases=cases)


def write(store: Store, dataset, run_id: str, skill: float, passes: int, failed: frozenset[str], seed: int) -> None:
    decisions = simulate_decisions(dataset, run_id, skill, seed, passes=passes, failed=failed)
    store.write_dataset(dataset)
    case_ids = dataset.cases["case_id"].to_list()
    store.write("runs", run_id, [{
        "run_id": run_id, "answer_model": f"model {run_id}", "judge_model": "judge-x",
        "protocol_version": PROTOCOL_VERSION, "dataset_sha256": dataset.sha256, "source": "collected",
        "created_at": "2025-01-01T00:00:00Z", "settings": None}])
    store.write("answers", run_id, [{
        "run_id": run_id, "case_id": c, "attempt": 1, "seq": i, "answer_model": f"model {run_id}",
        "answer": None if c in failed else f"{ANSWER} ({run_id}, case {i})", "answer_temperature": 1.0,
        "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:01:00Z",
        "error": "APIStatusError: simulated failure" if c in failed else None} for i, c in enumerate(case_ids)])
    judged = decisions.select("case_id", "judge_model", "judge_pass").unique(maintain_order=True)
    store.write("judgments", run_id, [{
        "run_id": run_id, "case_id": r["case_id"], "judge_model": r["judge_model"], "judge_pass": r["judge_pass"],
        "attempt": 1, "answer_attempt": 1, "seq": len(case_ids) + i, "judge_temperature": 0.0, "raw_reply": "{}",
        "started_at": "2025-01-01T00:02:00Z", "finished_at": "2025-01-01T00:03:00Z", "error": None}
        for i, r in enumerate(judged.iter_rows(named=True))])
    store.write("decisions", run_id, decisions.to_arrow())


def build(root: Path, sample_dataset, runs: int = 3) -> Store:
    store = Store.open(root)
    dataset = hostile_dataset(sample_dataset)
    failed = frozenset(dataset.cases["case_id"].to_list()[:2])
    for k, (run_id, skill, passes, fail) in enumerate(RUNS[:runs]):
        write(store, dataset, run_id, skill, passes, failed if fail is None else fail, seed=10 + k)
    return store
