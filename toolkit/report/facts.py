"""The reproducibility block: what was compared, with which settings, and the command that rebuilds the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import polars as pl

from toolkit.analysis import run_facts
from toolkit.dataset import DatasetError, default_dataset_path, load_dataset
from toolkit.report.analyses import Analyses
from toolkit.selection import JudgeSelection
from toolkit.store import Store


@dataclass(frozen=True)
class DatasetFacts:
    sha256: str
    name: str
    cases: int
    benchmarks: int
    runs: int


def toolkit_version() -> str:
    try:
        return version("bedside")
    except PackageNotFoundError:
        return "unknown (not installed)"


def store_version(store: Store) -> str | None:
    """The store's table version when the store format has one (Delta Lake), else None."""
    getter = getattr(store, "version", None)
    if not callable(getter):
        return None
    value = getter()
    return None if value is None else str(value)


def _named(source: Path) -> tuple[str, str]:
    """(digest, "name version") of a dataset checkout or file; the name from its registry.json when it has one."""
    loaded = load_dataset(source)
    label = source.name
    registry = source / "registry.json"
    if registry.is_file():
        meta = json.loads(registry.read_text(encoding="utf-8"))
        label = f"{meta.get('name', source.name)} {meta.get('version', '')}".strip()
    return loaded.sha256, label


def recorded_datasets(runs: pl.DataFrame) -> dict[str, list[str]]:
    """Digest -> the dataset paths runs recorded when they were collected or imported (settings "dataset" or
    selection "dataset"), first seen first."""
    out: dict[str, list[str]] = {}
    for sha, text in runs.select("dataset_sha256", "settings").iter_rows():
        try:
            settings = json.loads(text or "{}") or {}
        except ValueError:
            continue
        selection = settings.get("selection") if isinstance(settings.get("selection"), dict) else {}
        for path in (settings.get("dataset"), selection.get("dataset")):
            if isinstance(path, str) and path and path not in out.get(sha, []):
                out.setdefault(sha, []).append(path)
    return out


def dataset_facts(analyses: Analyses, dataset_path: str | None) -> list[DatasetFacts]:
    """One entry per dataset digest of the runs. The store keeps digests, not names: a digest is named from
    the dataset given (or the default one), else from the path its runs recorded at collection or import
    when that checkout still has the digest, else by that path alone."""
    known: dict[str, str] = {}
    try:
        sha, label = _named(Path(dataset_path) if dataset_path else default_dataset_path())
        known[sha] = label
    except (DatasetError, OSError, ValueError):
        if dataset_path:  # a dataset the user named must load; the default one is only a naming aid
            raise
    data = analyses.data
    recorded = recorded_datasets(data.runs) if "settings" in data.runs.columns else {}
    for sha, paths in recorded.items():
        for path in paths:
            if sha in known:
                break
            try:
                found, label = _named(Path(path))
            except (DatasetError, OSError, ValueError):
                found, label = None, None
            known[sha] = label if found == sha else f"{path} (as recorded by its runs; that path no longer " \
                                                     "holds this digest)"
    out = []
    for sha in data.runs["dataset_sha256"].unique(maintain_order=True).to_list():
        cases = data.cases.filter(pl.col("dataset_sha256") == sha)
        out.append(DatasetFacts(sha, known.get(sha, "not named (give --dataset to name it)"), cases.height,
                                cases["benchmark"].n_unique(), int((data.runs["dataset_sha256"] == sha).sum())))
    return out


def run_rows(analyses: Analyses, selection: JudgeSelection) -> pl.DataFrame:
    """One row per selected run: models, judge passes, temperatures, dates, case counts, source, the
    reference runner's overall interval next to the paired analysis's, and its cost (dollars, else tokens)."""
    data = analyses.data
    facts = run_facts(data, selection, analyses.cases)
    judges = data.judgments.group_by("run_id").agg(pl.col("judge_model").unique().sort().str.join(", ")
                                                   .alias("judge_models"))
    answer_t = data.answers.filter(pl.col("error").is_null()).group_by("run_id").agg(
        pl.col("answer_temperature").unique().sort().cast(pl.String).str.join(", ").alias("answer_temperature"))
    judge_t = data.judgments.filter(pl.col("error").is_null()).group_by("run_id").agg(
        pl.col("judge_temperature").unique().sort().cast(pl.String).str.join(", ").alias("judge_temperature"))
    events = pl.concat([data.answers.select("run_id", "started_at", "finished_at"),
                        data.judgments.select("run_id", "started_at", "finished_at")])
    dates = events.group_by("run_id").agg(
        pl.col("started_at").filter(pl.col("started_at") != "").min().str.slice(0, 10).alias("first_call"),
        pl.col("finished_at").filter(pl.col("finished_at") != "").max().str.slice(0, 10).alias("last_call"))
    board = analyses.cmp.leaderboard.select("run_id", "overall", "ci_low", "ci_high")
    reference = pl.DataFrame(
        [{"run_id": r, "reference_overall": s["overall_macro_mean"], "reference_ci_low": s["overall_ci95"][0],
          "reference_ci_high": s["overall_ci95"][1]} for r, s in analyses.reference.items()],
        schema={"run_id": pl.String, "reference_overall": pl.Float64, "reference_ci_low": pl.Float64,
                "reference_ci_high": pl.Float64})
    created = data.runs.select("run_id", pl.col("created_at").str.slice(0, 10).alias("created"))
    order = {r: i for i, r in enumerate(analyses.cmp.leaderboard["run_id"].to_list())}
    out = facts.sort(pl.col("run_id").replace_strict(order, default=len(order), return_dtype=pl.Int64),
                     maintain_order=True)
    costs = (analyses.costs.select("run_id", "cost", pl.col("usd").alias("cost_usd"), "tokens")
             if analyses.costs is not None else
             pl.DataFrame(schema={"run_id": pl.String, "cost": pl.String, "cost_usd": pl.Float64, "tokens": pl.Int64}))
    for extra in (judges, answer_t, judge_t, dates, created, board, reference, costs):
        out = out.join(extra, on="run_id", how="left", maintain_order="left")
    return out.with_columns(pl.col(pl.Float64).fill_nan(None)).select(
        "run_id", "answer_model", "judge_model", "judge_models", "passes", "answer_temperature", "judge_temperature",
        "created", "first_call", "last_call", "completed", "failed", "not_attempted", "benchmarks_missing", "source",
        "dataset_sha256", "overall", "ci_low", "ci_high", "reference_overall", "reference_ci_low", "reference_ci_high",
        "cost", "cost_usd", "tokens")

