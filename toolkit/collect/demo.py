"""The offline demo: simulated models answer the bundled sample, a simulated judge grades, a leaderboard.

Each model answers every case ``DEMO_ANSWER_SAMPLES`` times (``--answer-samples``) from a provider whose
answers to a case differ (``answer_spread``), so ``bedside variance`` and worst-at-k have answers to split.

A second simulated judge (``sim/judge-noisy``, two passes) grades the same answers again, as ``bedside
judge`` would, so judge agreement and judge noise have something to show; the primary judge stays
``sim/judge``, so scores and leaderboard come from it alone.

A simulated physician (``sim/physician``) then labels every rubric item of every answer of 20 of the 30
cases of each run with the simulator's ground truth (what the answer states, read by the rule its answers
are written to: ``toolkit.sim.models.answer_states``), through the same checks as ``bedside labels
import``. The primary judge reads by that same rule, so it agrees with the physician; the noisy judge
carries a planted bias (it reads harms into a quarter of the answers that avoid them and misses a tenth of
what answers state: ``toolkit.sim.models.misread_rate``) besides its slips, the judge error the labels
measure (``bedside calibrate --all --judge sim/judge-noisy``).

Everything runs in this process against the simulated provider on a free loopback port, through
the same collector a real run uses, into the default store (or ``store_dir``). The demo replaces
only runs it collected itself (marked in their settings); a run of the same id from anywhere else
is refused unless ``replace=True``, and nothing else in the store is touched.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

import polars as pl

from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import ensure_run, record_judge, run_row
from toolkit.collect.progress import ViewFactory
from toolkit.collect.runner import CollectJob, RunReport, collect
from toolkit.collect.settings import DEFAULT_CONCURRENCY, CollectSettings, Endpoint
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.config import REALISTIC_ANSWER_SPREAD
from toolkit.sim.models import answer_states
from toolkit.dataset import load_dataset
from toolkit.labels import ImportSummary, add_labels, current_answers, draw_cases
from toolkit.store import Store, StoreError, default_store_path
from toolkit.store.runs_ops import delete_run
from toolkit.summary import CI_METHOD, summarize
from toolkit.tables import LABEL_TABLES, TABLES

DEMO_MODELS = ("sim/strong", "sim/medium", "sim/weak", "sim/skill-0.45")
DEMO_JUDGE = "sim/judge"
DEMO_SECOND_JUDGE = "sim/judge-noisy"  # toolkit.sim.models.NOISY_JUDGE_MODEL
DEMO_SECOND_PASSES = (1, 2)
# Three answers per case, a third of their rubric items drawn afresh each time: enough for worst-at-k and
# the variance split to show something, little enough that the four models still rank apart.
DEMO_ANSWER_SAMPLES = 3
DEMO_ANSWER_SPREAD = REALISTIC_ANSWER_SPREAD
DEMO_MARK = "bedside demo"  # settings["collected_by"] of the runs the demo wrote
_STORE_ENTRIES = {*TABLES, *LABEL_TABLES, "journal", ".locks"}
DEMO_PHYSICIAN = "sim/physician"
DEMO_LABELLED_CASES = 20  # of the sample's 30: enough for the corrected overall's interval, 10 left to the judge
DEMO_LABEL_SEED = 20


def open_demo_store(root: Path) -> Store:
    """The store at ``root``; a directory that holds files but nothing of a store is refused."""
    if root.exists():
        if not root.is_dir():
            raise StoreError(f"{root}: not a directory")
        entries = sorted(p.name for p in root.iterdir())
        if entries and not _STORE_ENTRIES.intersection(entries):
            raise StoreError(f"{root}: holds {entries[0]!r}, which is not part of a bedside store; give the demo a "
                             "store or a new or empty directory with --store")
    return Store.open(root)


def is_demo_run(row: dict[str, Any]) -> bool:
    """A runs row the demo wrote: collected, the id is a demo model's, graded by the simulated judge and
    marked in its settings. An imported or hand-collected run of the same id is not one."""
    try:
        settings = json.loads(row.get("settings") or "{}")
    except json.JSONDecodeError:
        return False
    return (row["source"] == "collected" and row["run_id"] in DEMO_MODELS and row["answer_model"] == row["run_id"]
            and row["judge_model"] == DEMO_JUDGE and isinstance(settings, dict)
            and settings.get("collected_by") == DEMO_MARK)


def runs_to_replace(store: Store, replace: bool = False) -> list[str]:
    """The demo run ids already in the store, all of them the demo's own (or ``replace``); StoreError
    naming the first that is not, before anything is removed."""
    present = [r for r in DEMO_MODELS if store.has_run(r)]
    for run_id in present:
        row = store.run(run_id)
        if not replace and not is_demo_run(row):
            origin = f"imported from {row['source_file']}" if row["source"] == "imported" and row["source_file"] \
                else f"{row['source']}, answer model {row['answer_model']!r}, judge {row['judge_model']!r}"
            raise StoreError(f"{store.root}: run {run_id!r} was not collected by the demo ({origin}); the demo would "
                             "replace it: give --replace to let it, or another --store")
    return present


def run_demo(store_dir: str | None = None, concurrency: int = DEFAULT_CONCURRENCY, views: ViewFactory | None = None,
             latency_ms: float = 20.0, replace: bool = False,
             say: Callable[[str], None] | None = None) -> tuple[Store, list[RunReport], pl.DataFrame | None]:
    """Collect the demo models into the store (default: ``$BEDSIDE_STORE`` or ./data/results); (store,
    reports, leaderboard of the demo runs).

    The demo's own earlier runs are replaced (``say`` is told which); any other run with a demo id is
    refused unless ``replace``. ``concurrency``: calls in flight at the simulated endpoint, shared by the
    four models. When the collection was interrupted (Ctrl-C; ``reports[i].interrupted``) the leaderboard
    is None: a ranking of partly collected runs would mislead.
    """
    store = open_demo_store(Store.open(store_dir).root if store_dir else default_store_path())  # path or s3 URL
    dataset = load_dataset(None)
    earlier = runs_to_replace(store, replace)
    for run_id in earlier:
        delete_run(store, run_id)
    if earlier and say is not None:
        say(f"replaced the demo's earlier runs {', '.join(earlier)} in {store.root} (nothing else was touched)")
    store.write_dataset(dataset)
    cases = tuple(case_to_judge(c) for c in dataset.raw_cases)

    def prepare(s: Store, job: CollectJob) -> None:
        if s.has_run(job.settings.run_id):  # resumed within this call (never here today): same checks as a run
            ensure_run(s, job.settings, dataset.sha256)
        else:
            s.write("runs", job.settings.run_id, [run_row(job.settings, dataset.sha256,
                                                          extra={"collected_by": DEMO_MARK})])

    with SimServer(SimConfig(latency_ms=latency_ms, answer_spread=DEMO_ANSWER_SPREAD)) as sim:
        endpoint = Endpoint("sim", sim.base_url, ())
        jobs = [CollectJob(CollectSettings(run_id=model, answer_model=model, judge_model=DEMO_JUDGE,
                                           answer_endpoint=endpoint, judge_endpoint=endpoint, concurrency=concurrency,
                                           answer_samples=DEMO_ANSWER_SAMPLES),
                           cases) for model in DEMO_MODELS]
        reports = collect(store, jobs, views, label="demo", prepare=prepare)
        if not any(r.interrupted for r in reports):
            reports += collect(store, [second_judge_job(job, endpoint) for job in jobs], views, label="demo",
                               prepare=note_judge)
    if any(r.interrupted for r in reports):
        return store, reports, None
    labelled = physician_labels(store, list(DEMO_MODELS))
    if say is not None:
        count = labelled.added + labelled.already  # a second demo finds the labels of the same answers stored
        say(f"physician: {DEMO_PHYSICIAN} labelled {count} rubric items ({DEMO_LABELLED_CASES} cases of "
            "each run, every answer) with the simulator's ground truth: `bedside labels`")
    return store, reports, leaderboard(store, list(DEMO_MODELS))


def report_lines(reports: list[RunReport]) -> list[str]:
    """The demo runs' lines: the four runs are collected at once (then judged again at once), so each report's
    time is that collection's wall time; it is said once after the runs it covers, not on every run's line."""
    lines: list[str] = []
    size = len(DEMO_MODELS)
    for start in range(0, len(reports), size):
        group = reports[start:start + size]
        for report in group:
            lines.append(report.line().removesuffix(f" in {report.elapsed_s:.1f}s"))  # the time is said below
            if report.failure_line():
                lines.append(report.failure_line())
        verb = "collected" if group[0].answering else "judged"
        lines.append(f"the {len(group)} runs above were {verb} at once in {group[0].elapsed_s:.1f}s (one wall time "
                     f"for the {len(group)})")
    return lines


def physician_labels(store: Store, run_ids: list[str], cases: int = DEMO_LABELLED_CASES,
                     seed: int = DEMO_LABEL_SEED) -> ImportSummary:
    """The simulated physician's labels: each rubric item of each answer (the latest successful attempt of
    every sample) of ``cases`` cases drawn by ``seed`` within benchmarks (``draw_cases``; the same cases for
    every run), met when the answer states it, by the rule the simulated answers are written to."""
    answers = store.read("answers", run_ids, columns=["run_id", "case_id", "sample", "attempt", "answer", "error"])
    answers = current_answers(answers).sort("run_id", "case_id", "sample")
    digests = store.read("runs", run_ids, columns=["dataset_sha256"])["dataset_sha256"].unique().to_list()
    case_rows = store.read("cases", keys=digests, columns=["case_id", "benchmark", "position"]).sort("position")
    chosen = set(draw_cases(case_rows, cases, random.Random(seed)))  # as `bedside review` draws them
    items = store.read("rubric_items", keys=digests, columns=["case_id", "item_id", "text"])
    rubric: dict[str, list[tuple[str, str]]] = {}
    for case_id, item_id, text in items.iter_rows():
        rubric.setdefault(case_id, []).append((item_id, text))
    rows = [{"where": f"{DEMO_PHYSICIAN}: run {a['run_id']!r} case {a['case_id']!r}", "reviewer": DEMO_PHYSICIAN,
             "run_id": a["run_id"], "case_id": a["case_id"], "sample": a["sample"], "item_id": item_id,
             "label": "met" if answer_states(a["answer"], text) else "not_met", "labelled_at": None}
            for a in answers.iter_rows(named=True) if a["case_id"] in chosen
            for item_id, text in rubric.get(a["case_id"], [])]
    return add_labels(store, rows, f"the demo's {DEMO_PHYSICIAN}")


def note_judge(store: Store, job: CollectJob) -> None:
    """Record the second judge in the run's settings and steps, as ``bedside judge`` does."""
    s = job.settings
    record_judge(store, store.run(s.run_id), s.judge_model, s.judge_endpoint.describe(), s.judge_passes)


def second_judge_job(job: CollectJob, endpoint: Endpoint) -> CollectJob:
    """The second judge's passes over a demo run's stored answers (what ``bedside judge`` collects)."""
    s = job.settings
    return CollectJob(CollectSettings(run_id=s.run_id, answer_model=s.answer_model, judge_model=DEMO_SECOND_JUDGE,
                                      answer_endpoint=None, judge_endpoint=endpoint, concurrency=s.concurrency,
                                      judge_passes=DEMO_SECOND_PASSES, answer_samples=s.answer_samples),
                      job.cases, answer=False)


def leaderboard(store: Store, run_ids: list[str] | None = None) -> pl.DataFrame:
    """One row per run (default: every run), best first: macro mean with its 95% interval, the reference's
    percentile bootstrap (named on each row: ``compare`` shows another)."""
    summaries = summarize(store, run_ids if run_ids is not None else store.run_ids())
    rows = [{"run": run_id, "answer_model": s["answer_model"], "judge_model": s["judge_model"],
             "overall": s["overall_macro_mean"], "ci95_low": s["overall_ci95"][0], "ci95_high": s["overall_ci95"][1],
             "cases": s["completed_cases"], "errors": s["errors"], "ci_method": CI_METHOD}
            for run_id, s in summaries.items()]
    board = pl.DataFrame(rows).sort("overall", descending=True, nulls_last=True)
    return board.with_row_index("rank", offset=1)
