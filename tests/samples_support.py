"""Multi-sample runs written through the store API: K answers per case (samples 0..K-1), each judged, for the
tests of answer samples (tests/test_samples_*.py)."""

from __future__ import annotations

from typing import Callable

import polars as pl

from tests import analysis_sim
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.scoring import with_sample
from toolkit.store import Store


def sample_decisions(dataset, run_id: str, samples: int, passes: int = 1, seed: int = 1) -> pl.DataFrame:
    """Decision rows of ``samples`` answers per case: each sample its own draw (a different seed)."""
    return pl.concat([
        analysis_sim.simulate_decisions(dataset, run_id, 0.3, seed * 100 + k, passes=passes, flip=0.2)
        .with_columns(sample=pl.lit(k, dtype=pl.Int32)) for k in range(samples)])


def write_samples(store: Store, dataset, run_id: str, decisions: pl.DataFrame, *, judge: str = "judge-x",
                  source: str = "collected", answer: Callable[[dict, int], dict] | None = None) -> None:
    """The runs, answers and judgments rows around multi-sample ``decisions`` (one commit each); ``answer``
    gives an answer row's own fields from its (case_id, sample) row and its position."""
    store.write_dataset(dataset)
    store.write("runs", run_id, [{
        "run_id": run_id, "answer_model": f"model-{run_id}", "judge_model": judge,
        "protocol_version": PROTOCOL_VERSION, "dataset_sha256": dataset.sha256, "source": source,
        "created_at": "2025-01-01T00:00:00Z", "settings": None}])
    keyed = with_sample(decisions)  # decisions without the column: stored as sample 0
    answers = keyed.select("case_id", "sample").unique(maintain_order=True)
    fields = answer or (lambda row, i: {"answer_model": f"model-{run_id}", "answer": f"answer {row['sample']}"})
    store.write("answers", run_id, [{
        "run_id": run_id, "case_id": row["case_id"], "sample": row["sample"], "attempt": 1, "seq": i,
        "error": None, **fields(row, i)} for i, row in enumerate(answers.iter_rows(named=True))])
    judged = keyed.select("case_id", "sample", "judge_model", "judge_pass", "judgment_attempt").unique(
        maintain_order=True)
    store.write("judgments", run_id, [{
        "run_id": run_id, "case_id": row["case_id"], "sample": row["sample"], "judge_model": row["judge_model"],
        "judge_pass": row["judge_pass"], "attempt": row["judgment_attempt"], "answer_attempt": 1,
        "seq": answers.height + i, "raw_reply": "{}", "error": None}
        for i, row in enumerate(judged.iter_rows(named=True))])
    store.write("decisions", run_id, decisions.to_arrow())
