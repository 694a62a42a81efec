"""The offline demo: simulated models answer the bundled sample, a simulated judge grades, a leaderboard.

Everything runs in this process against the simulated provider on a free
loopback port, through the same collector a real run uses.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import ensure_run
from toolkit.collect.progress import ViewFactory
from toolkit.collect.runner import CollectJob, RunReport, collect
from toolkit.collect.settings import DEFAULT_CONCURRENCY, CollectSettings, Endpoint
from toolkit.collect.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.store import DEFAULT_STORE, Store, StoreError
from toolkit.summary import summarize
from toolkit.tables import TABLES

DEMO_STORE = DEFAULT_STORE / "demo"
DEMO_MODELS = ("sim/strong", "sim/medium", "sim/weak", "sim/skill-0.45")
DEMO_JUDGE = "sim/judge"
_STORE_ENTRIES = {*TABLES, "journal", ".locks"}


def fresh_store(root: Path) -> Store:
    """An empty store at ``root``; an existing directory is wiped only if it holds nothing but a store."""
    if root.exists():
        if not root.is_dir():
            raise StoreError(f"{root}: not a directory")
        foreign = sorted(p.name for p in root.iterdir() if p.name not in _STORE_ENTRIES)
        if foreign:
            raise StoreError(f"{root}: holds {foreign[0]!r}, which is not part of a bedside store; the demo wipes "
                             "its store, so give it a new or empty directory with --store")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return Store.open(root)


def run_demo(store_dir: str | None = None, concurrency: int = DEFAULT_CONCURRENCY, views: ViewFactory | None = None,
             latency_ms: float = 20.0) -> tuple[Store, list[RunReport], pl.DataFrame | None]:
    """Collect the demo models into a fresh store; (store, reports, leaderboard).

    ``concurrency``: calls in flight at the simulated endpoint, shared by the four models. When the
    collection was interrupted (Ctrl-C; ``reports[i].interrupted``) the store is incomplete and the
    leaderboard is None: a ranking of partly collected runs would mislead.
    """
    store = fresh_store(Path(store_dir) if store_dir else DEMO_STORE)
    dataset = load_dataset(None)
    store.write_dataset(dataset)
    cases = tuple(case_to_judge(c) for c in dataset.raw_cases)
    with SimServer(SimConfig(latency_ms=latency_ms)) as sim:
        endpoint = Endpoint("sim", sim.base_url, ())
        jobs = [CollectJob(CollectSettings(model, model, DEMO_JUDGE, endpoint, endpoint, concurrency=concurrency),
                           cases) for model in DEMO_MODELS]
        reports = collect(store, jobs, views, label="demo",
                          prepare=lambda s, job: ensure_run(s, job.settings, dataset.sha256))
    if any(r.interrupted for r in reports):
        return store, reports, None
    return store, reports, leaderboard(store)


def leaderboard(store: Store) -> pl.DataFrame:
    """One row per run, best first: macro mean with its 95% bootstrap interval."""
    summaries = summarize(store, store.run_ids())
    rows = [{"run": run_id, "answer_model": s["answer_model"], "judge_model": s["judge_model"],
             "overall": s["overall_macro_mean"], "ci95_low": s["overall_ci95"][0], "ci95_high": s["overall_ci95"][1],
             "cases": s["completed_cases"], "errors": s["errors"]} for run_id, s in summaries.items()]
    board = pl.DataFrame(rows).sort("overall", descending=True, nulls_last=True)
    return board.with_row_index("rank", offset=1)
