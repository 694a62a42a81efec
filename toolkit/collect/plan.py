"""What a run already holds and what is left to call: the basis of resuming without paying twice.

Read once at start, after the journal is recovered: the latest successful
answer of each (case, sample), the (case, sample, judge, pass) keys already
judged validly, the next attempt numbers and the next ``seq``. A run with
``--answer-samples K`` asks samples 0..K-1 of every case; each is judged.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from toolkit.sql import follow_commits
from toolkit import protocol
from toolkit.collect.judge import CaseToJudge
from toolkit.collect.settings import CollectSettings, SettingsError
from toolkit.collect.journal import pending_rows
from toolkit.store import Store, StoreError
from toolkit.tables import to_arrow

follow_commits()  # registered `bedside db` files follow this process's commits


@dataclass(frozen=True)
class StoredAnswer:
    attempt: int
    text: str
    latency_s: float | None


Unit = tuple[str, int]  # (case, answer sample): what one answer call fills
JudgeKey = tuple[str, int, str, int]  # (case, sample, judge, pass)


@dataclass
class StoredWork:
    """A run's stored progress; the runner advances the counters as it appends."""

    answers: dict[Unit, StoredAnswer] = field(default_factory=dict)
    answer_attempts: dict[Unit, int] = field(default_factory=dict)  # (case, sample) -> highest attempt stored
    judged: set[JudgeKey] = field(default_factory=set)  # valid (case, sample, judge, pass)
    judge_attempts: dict[JudgeKey, int] = field(default_factory=dict)
    last_seq: int = 0
    # Keys of every stored row, failed ones included: a batch line whose row is already stored (a rerun
    # after a crash mid-ingest) is not stored again.
    answer_keys: set[tuple[str, int, int]] = field(default_factory=set)  # (case, sample, attempt)
    judgment_keys: set[tuple[str, int, str, int, int]] = field(default_factory=set)  # JudgeKey + attempt

    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    def next_answer_attempt(self, unit: Unit) -> int:
        self.answer_attempts[unit] = self.answer_attempts.get(unit, 0) + 1
        return self.answer_attempts[unit]

    def next_judge_attempt(self, key: JudgeKey) -> int:
        self.judge_attempts[key] = self.judge_attempts.get(key, 0) + 1
        return self.judge_attempts[key]

    @property
    def samples_stored(self) -> int:
        """Answer samples per case the run has asked for so far (highest sample attempted + 1; 0 when none)."""
        return 1 + max((sample for _, sample in self.answer_attempts), default=-1)


def read_stored_work(store: Store, run_id: str, journal: bool = False) -> StoredWork:
    """What the run holds in Parquet; ``journal`` adds the rows its journals hold that are not checkpointed
    yet (read only: a dry run after a crash must not count them as still due)."""
    answers = store.read("answers", [run_id])
    judgments = store.read("judgments", [run_id])
    if journal:
        rows = pending_rows(store, run_id)
        answers = pl.concat([answers, pl.from_arrow(to_arrow("answers", rows.get("answers", [])))])
        judgments = pl.concat([judgments, pl.from_arrow(to_arrow("judgments", rows.get("judgments", [])))])
    work = StoredWork()
    ok = answers.filter(pl.col("error").is_null() & pl.col("answer").is_not_null())
    for case_id, sample, attempt, text, latency in (
            ok.sort("attempt").group_by("case_id", "sample").last()
            .select("case_id", "sample", "attempt", "answer", "latency_s").iter_rows()):
        work.answers[(case_id, int(sample))] = StoredAnswer(attempt, text, latency)
    work.answer_attempts = {(c, int(s)): a for c, s, a in answers.group_by("case_id", "sample").agg(
        pl.col("attempt").max()).iter_rows()}
    valid = judgments.filter(pl.col("error").is_null()).select("case_id", "sample", "judge_model", "judge_pass")
    work.judged = {(c, int(s), j, int(p)) for c, s, j, p in valid.iter_rows()}
    for c, s, j, p, a in judgments.group_by("case_id", "sample", "judge_model", "judge_pass").agg(
            pl.col("attempt").max()).iter_rows():
        work.judge_attempts[(c, int(s), j, int(p))] = a
    work.answer_keys = {(c, int(s), a) for c, s, a in answers.select("case_id", "sample", "attempt").iter_rows()}
    work.judgment_keys = {(c, int(s), j, int(p), a) for c, s, j, p, a in judgments.select(
        "case_id", "sample", "judge_model", "judge_pass", "attempt").iter_rows()}
    seqs = [s for s in (answers["seq"].max(), judgments["seq"].max()) if s is not None]
    work.last_seq = int(max(seqs, default=0))
    return work


@dataclass(frozen=True)
class Plan:
    """The calls a run still needs, case by case in dataset order, a case's samples together."""

    cases: tuple[CaseToJudge, ...]
    to_answer: tuple[Unit, ...]
    to_judge: tuple[tuple[str, int, int], ...]  # (case, sample, pass) for the plan's judge model
    judge_model: str
    skipped_answers: int
    skipped_judgments: int
    unanswerable: int = 0  # judge-only plans: (case, sample) units without a stored answer
    answering: bool = True


def make_plan(cases: list[CaseToJudge], work: StoredWork, judge_model: str, passes: tuple[int, ...],
              answer: bool, samples: int = 1, run_id: str = "") -> Plan:
    """``answer`` False: judge the stored answers of every sample; units the run attempted without a
    successful answer are counted as unanswerable, units it never attempted are not part of it.
    ``samples``: answer samples 0..samples-1 per case; fewer than the run already asked for is refused
    (those samples would be left unfinished without a word)."""
    if answer and work.samples_stored > samples:
        raise SettingsError(f"run {run_id!r} holds {work.samples_stored} answer samples per case, more than the "
                            f"{samples} asked for: give --answer-samples {work.samples_stored} (or more) to resume it")
    answered = set(work.answers)
    if answer:
        units = [(c.case_id, k) for c in cases for k in range(samples)]
    else:
        attempted = {*work.answer_attempts, *answered}
        units = [(c.case_id, k) for c in cases for k in range(work.samples_stored) if (c.case_id, k) in attempted]
        cases = [c for c in cases if any((c.case_id, k) in attempted for k in range(work.samples_stored))]
    to_answer = tuple(u for u in units if u not in answered) if answer else ()
    judgeable = [u for u in units if answer or u in answered]
    to_judge = tuple((c, k, p) for c, k in judgeable for p in passes if (c, k, judge_model, p) not in work.judged)
    return Plan(tuple(cases), to_answer, to_judge, judge_model,
                skipped_answers=len(units) - len(to_answer) if answer else 0,
                skipped_judgments=len(judgeable) * len(passes) - len(to_judge),
                unanswerable=0 if answer else len(units) - len(judgeable), answering=answer)


def cases_from_store(store: Store, dataset_sha256: str) -> list[CaseToJudge]:
    """A run's cases rebuilt from the stored dataset tables (judging needs no dataset path)."""
    if not store.has_dataset(dataset_sha256):
        raise StoreError(f"{store.root}: dataset {dataset_sha256} is not stored")
    cases = store.read("cases").filter(pl.col("dataset_sha256") == dataset_sha256).sort("position")
    items = store.read("rubric_items").filter(pl.col("dataset_sha256") == dataset_sha256).sort("case_id", "item_index")
    by_case: dict[str, list[tuple[str, float, str]]] = {}
    for case_id, item_id, points, text in items.select("case_id", "item_id", "points", "text").iter_rows():
        by_case.setdefault(case_id, []).append((item_id, points, text))
    return [CaseToJudge(c, p, tuple(by_case.get(c, ()))) for c, p in cases.select("case_id", "prompt").iter_rows()]


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def run_row(settings: CollectSettings, dataset_sha256: str, created_at: str | None = None,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "run_id": settings.run_id, "answer_model": settings.answer_model, "judge_model": settings.judge_model,
        "protocol_version": protocol.PROTOCOL_VERSION, "dataset_sha256": dataset_sha256, "source": "collected",
        "source_file": None, "answer_reasoning_effort": settings.reasoning_effort,
        "created_at": created_at or now_iso(), "settings": json.dumps({**settings.describe(), **(extra or {})}),
    }


def ensure_run(store: Store, settings: CollectSettings, dataset_sha256: str) -> dict[str, Any]:
    """Create the runs row, or refuse a resume whose answer model or dataset differs; either way the
    collection step is recorded (``steps``) and ``settings`` says the latest one. Under the run's lock."""
    step = {"at": now_iso(), "kind": "run", "settings": settings.describe()}
    if not store.has_run(settings.run_id):
        row = run_row(settings, dataset_sha256)
        store.commit_run(settings.run_id, None, row, step=step)
        return store.run(settings.run_id)
    row = store.run(settings.run_id)
    if row["answer_model"] != settings.answer_model:
        raise StoreError(f"run {settings.run_id!r} holds answers of {row['answer_model']!r}, not "
                         f"{settings.answer_model!r}: choose another --run-id")
    if row["answer_reasoning_effort"] != settings.reasoning_effort:
        raise StoreError(f"run {settings.run_id!r} was answered with --reasoning-effort "
                         f"{_effort(row['answer_reasoning_effort'])}, not {_effort(settings.reasoning_effort)}: "
                         "give the same setting to resume it, or choose another --run-id")
    if row["dataset_sha256"] != dataset_sha256:
        raise StoreError(f"run {settings.run_id!r} was collected on dataset {row['dataset_sha256'][:12]}..., "
                         f"not {dataset_sha256[:12]}... (a different --dataset): choose another --run-id")
    previous = json.loads(row["settings"] or "{}")
    latest = {**settings.describe(), **{k: v for k, v in previous.items() if k == "additional_judges"}}
    store.commit_run(settings.run_id, None, {"settings": json.dumps(latest)}, step=step)
    return store.run(settings.run_id)


def _effort(value: str | None) -> str:
    return "(none)" if value is None else repr(value)


def record_judge(store: Store, run: dict[str, Any], judge_model: str, endpoint: dict[str, Any],
                 passes: tuple[int, ...] | None = None) -> None:
    """Note a judging step: an additional judge's endpoint goes into the run's settings; ``passes`` given
    (``bedside judge``) records the step in ``steps`` even for the primary judge. One runs row either way."""
    settings = json.loads(run["settings"] or "{}")
    judges = settings.setdefault("additional_judges", {})
    new_judge = judge_model != run["judge_model"] and judges.get(judge_model) != endpoint
    if not new_judge and passes is None:
        return
    if new_judge:
        judges[judge_model] = endpoint
    step = {"at": now_iso(), "kind": "judge", "judge_model": judge_model, "endpoint": endpoint,
            "passes": list(passes) if passes is not None else None}
    store.commit_run(run["run_id"], None, {"settings": json.dumps(settings)}, step=step)
