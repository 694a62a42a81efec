"""What each compared run is (models, judge, passes, dataset, completed and failed cases), and
which runs may be compared with each other."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit.listing import case_coverage
from toolkit.selection import JudgeSelection, RunData, select_judgments

FACT_COLUMNS = ("run_id", "answer_model", "judge_model", "passes", "dataset_sha256", "source", "completed", "failed",
                "not_attempted", "benchmarks_missing")


def run_facts(data: RunData, selection: JudgeSelection, cases: pl.DataFrame) -> pl.DataFrame:
    """One row per run of ``data.runs``.

    ``judge_model`` is the judge scored (the selection's, else the run's own); ``passes`` the judge
    passes found in its decisions (e.g. "1,2"; the stored pass scores say which when the decisions were not
    read); the case counts are ``case_coverage``'s.
    """
    scored = data.stored_passes if data.stored_passes is not None and selection.is_stored \
        else select_judgments(data, selection)[1]
    passes = scored.group_by("run_id").agg(
        pl.col("judge_pass").unique().sort().cast(pl.String).str.join(",").alias("passes"))
    judge = pl.lit(selection.judge) if selection.judge is not None else pl.col("judge_model")
    return (
        data.runs.select("run_id", "answer_model", judge.cast(pl.String).alias("judge_model"), "dataset_sha256",
                         "source")
        .join(passes, on="run_id", how="left", maintain_order="left")
        .join(case_coverage(data, cases), on="run_id", how="left", maintain_order="left")
        .with_columns(pl.col("passes").fill_null(""))
        .select(FACT_COLUMNS)
    )


@dataclass(frozen=True, eq=False)
class Comparable:
    """The runs kept for a comparison, those left out with the reason, and what was mixed."""

    run_ids: list[str]
    excluded: pl.DataFrame  # run_id, dataset_sha256, judge_model, reason
    mixed: list[str]  # human-readable notes, empty when all kept runs share dataset and judge


def comparable_runs(facts: pl.DataFrame, allow_mixed: bool = False) -> Comparable:
    """Runs graded on one dataset digest with one judge, unless ``allow_mixed``.

    Without ``allow_mixed`` the largest group of runs sharing (dataset, judge) is kept (ties: the
    group of the earliest run given) and every other run is listed with the reason. Runs without a
    completed case are always left out.
    """
    empty = facts.filter(pl.col("completed") == 0)
    usable = facts.filter(pl.col("completed") > 0)
    excluded = [empty.select("run_id", "dataset_sha256", "judge_model",
                             pl.lit("no completed case under this judge selection").alias("reason"))]
    mixed: list[str] = []
    if usable.height and not allow_mixed:
        groups = usable.with_row_index("_i").group_by("dataset_sha256", "judge_model").agg(
            pl.len().alias("_n"), pl.col("_i").min().alias("_first")).sort(["_n", "_first"], descending=[True, False])
        sha, judge = groups.row(0)[:2]
        keep = (pl.col("dataset_sha256") == sha) & (pl.col("judge_model").eq_missing(judge))
        reason = (pl.when(pl.col("dataset_sha256") != sha)
                  .then(pl.format("dataset {} differs from {}", pl.col("dataset_sha256").str.slice(0, 12),
                                  pl.lit(sha[:12])))
                  .otherwise(pl.format("judge {} differs from {}", pl.col("judge_model").fill_null("?"),
                                       pl.lit(judge or "?"))))
        excluded.append(usable.filter(~keep).select("run_id", "dataset_sha256", "judge_model",
                                                    reason.alias("reason")))
        usable = usable.filter(keep)
    elif usable.height:
        digests = usable["dataset_sha256"].unique(maintain_order=True).to_list()
        judges = usable["judge_model"].unique(maintain_order=True).to_list()
        if len(digests) > 1:
            mixed.append(f"mixed datasets ({len(digests)}): " + ", ".join(d[:12] for d in digests)
                         + "; pairs are compared on the cases they share")
        if len(judges) > 1:
            mixed.append(f"mixed judges ({len(judges)}): " + ", ".join(str(j) for j in judges))
    return Comparable(usable["run_id"].to_list(), pl.concat(excluded), mixed)
