"""Leaderboard, paired comparisons, rank intervals, tie groups and per-benchmark differences of stored runs.

Runs are ranked like for like (``toolkit.analysis.ranking``): a run that misses a
benchmark of the comparison, or has a single case in one, is listed in
``not_ranked`` with its own numbers and the reason, and takes no part in ranks,
pairs or tie groups. Means are exact (the benchmark mean of the completed case
scores, the overall the macro mean over benchmarks, summed as ``bedside summary``
sums, so the numbers agree to the bit). Run intervals (leaderboard and benchmark
rows) are stratified t intervals of the run's case scores (``paired_t``, the
estimator of the pairwise rows), not the reference runner's percentile bootstrap
that ``bedside summary`` shows: the bootstrap under-covers at the benchmark sizes
in use. Rank intervals come from resamples shared by the ranked runs. With a
baseline the pairwise rows are each ranked run against it, and their Holm/BH
family is those rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from toolkit.analysis.case_comparison import (CaseComparison, compare_cases, compare_matrix,  # noqa: F401
                                              resample_units)
from toolkit.analysis.paired import ResampleSettings, small_sample_note
from toolkit.analysis.ranking import competition_ranks as _competition_ranks, rank_intervals  # noqa: F401
from toolkit.analysis.runs import comparable_runs, run_facts
from toolkit.scoring import with_sample
from toolkit.selection import JudgeSelection, RunData, per_case, read_runs
from toolkit.store import Store

INTERVAL_NOTE = ("leaderboard and benchmark intervals: stratified t over cases (the estimator of the pairwise rows, "
                 "applied to each run's scores), not the reference runner's bootstrap that `summary` shows; they "
                 "cover new cases with new answers and judge passes (answer and judge variance are inside the "
                 "spread of case scores), not a judge's systematic bias or later provider changes")
# The interval each section prints, by name (compare's tables, JSON and CSV carry it as ci_method).
RUN_INTERVAL = "stratified t"  # a run's score: leaderboard, not_ranked, benchmarks (one stratum: the t)
PAIR_INTERVAL = "paired stratified t"  # a difference of two runs on their common cases: pairwise, versus
INTERVAL_METHODS = {"leaderboard": RUN_INTERVAL, "not_ranked": RUN_INTERVAL, "benchmarks": RUN_INTERVAL,
                    "pairwise": PAIR_INTERVAL, "versus": PAIR_INTERVAL}
# What the notes compare_data adds are about (a note about none of the sections shown is not printed).
RUNS, PAIRS = ("leaderboard", "not_ranked", "benchmarks"), ("pairwise", "versus")


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    resamples: ResampleSettings = field(default_factory=ResampleSettings)
    per_benchmark: bool = False  # pairwise rows per benchmark too (a Holm/BH family of their own)
    allow_mixed: bool = False  # compare runs graded on different datasets or by different judges
    selection: JudgeSelection = field(default_factory=JudgeSelection)
    baseline: str | None = None  # pairwise rows: each other ranked run against this one


@dataclass(frozen=True, eq=False)
class Comparison:
    leaderboard: pl.DataFrame  # ranked runs only
    benchmarks: pl.DataFrame
    pairwise: pl.DataFrame  # oriented: (better, worse), or (other, baseline); a family column
    ranks: pl.DataFrame
    excluded: pl.DataFrame
    notes: list[str]
    not_ranked: pl.DataFrame = field(default_factory=pl.DataFrame)
    versus: pl.DataFrame = field(default_factory=pl.DataFrame)
    separability: float | None = None  # share of adjacent ranked pairs told apart (Holm, all pairs)
    baseline: str | None = None
    separation: pl.DataFrame = field(default_factory=pl.DataFrame)  # separability's one-row frame with counts
    note_sections: tuple[tuple[str, ...], ...] = ()  # per note, the sections it is about (empty: every one)

    def run_order(self, run_ids: list[str]) -> list[str]:
        """``run_ids`` in leaderboard order: ranked, not ranked, left out, then the others as given."""
        ids = self.leaderboard["run_id"].to_list() + self.not_ranked["run_id"].to_list() + \
            self.excluded["run_id"].to_list()
        return list(dict.fromkeys(ids + run_ids))

    def notes_for(self, shown: list[str]) -> list[str]:
        """The notes about any of the ``shown`` sections (a note about no section in particular always)."""
        about = dict(zip(self.notes, self.note_sections))
        return [n for n in self.notes if not about.get(n) or set(about[n]) & set(shown)]

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"leaderboard": self.leaderboard, "not_ranked": self.not_ranked, "benchmarks": self.benchmarks,
                "pairwise": self.pairwise, "versus": self.versus, "ranks": self.ranks,
                "separability": self.separation, "excluded": self.excluded}


def compare(store: Store, run_ids: list[str], options: CompareOptions = CompareOptions()) -> Comparison:
    """Leaderboard, per-benchmark means, pairwise differences and rank intervals of stored runs."""
    return compare_data(read_runs(store, run_ids, texts=False), options)


def _dataset_benchmarks(data: RunData, run_ids: list[str]) -> int:
    """How many benchmarks the compared runs' dataset(s) have: a ranked run covers every one of them."""
    digests = data.runs.filter(pl.col("run_id").is_in(run_ids))["dataset_sha256"].unique().to_list()
    return data.cases.filter(pl.col("dataset_sha256").is_in(digests))["benchmark"].n_unique()


def compare_data(data: RunData, options: CompareOptions = CompareOptions()) -> Comparison:
    cases = per_case(data, options.selection)
    facts = run_facts(data, options.selection, cases)
    chosen = comparable_runs(facts, options.allow_mixed)
    if not chosen.run_ids:
        why = "; ".join(f"{r}: {w}" for r, w in chosen.excluded.select("run_id", "reason").iter_rows())
        raise ValueError(f"compare: no run left to compare ({why})")
    if options.baseline is not None and options.baseline not in chosen.run_ids:
        given = options.baseline in facts["run_id"].to_list()
        why = "was left out of the comparison (see excluded)" if given else "is not among the compared runs"
        raise ValueError(f"compare: baseline {options.baseline!r} {why} (compared: {', '.join(chosen.run_ids)})")
    try:
        result = compare_cases(cases.filter(pl.col("run_id").is_in(chosen.run_ids)), chosen.run_ids,
                               options.resamples, options.per_benchmark, baseline=options.baseline,
                               benchmarks=_dataset_benchmarks(data, chosen.run_ids))
    except ValueError as error:
        raise ValueError(f"compare: {error}") from None
    leaderboard = result.units.rename({"unit": "run_id"}).join(
        facts.drop("completed"), on="run_id", maintain_order="left").select(
        "rank", "tie_group", "run_id", "answer_model", "overall", "ci_low", "ci_high", "ci_note", "n_benchmarks",
        pl.col("n_cases").alias("completed"), "failed", "not_attempted", "benchmarks_missing", "judge_model",
        "passes", "dataset_sha256", "source")
    not_ranked = result.not_ranked.rename({"unit": "run_id"}).join(
        facts.drop("completed"), on="run_id", maintain_order="left").select(
        "run_id", "answer_model", "overall", "ci_low", "ci_high", "ci_note", "n_benchmarks",
        pl.col("n_cases").alias("completed"), "benchmarks_missing", "reason")
    tagged = [((), n) for n in chosen.mixed] + list(zip(result.note_sections, result.notes))
    if chosen.excluded.height:
        tagged.append((("leaderboard", "excluded"), f"{chosen.excluded.height} run(s) left out; see the excluded "
                       "table (or use --allow-mixed)"))
    ranked = set(leaderboard["run_id"].to_list())
    union = cases.filter(pl.col("run_id").is_in(list(ranked))).select("benchmark", "case_id").unique().height
    short = leaderboard.filter(pl.col("completed") < union).height
    if short:
        tagged.append((("leaderboard", "pairwise", "ranks"),
                       f"completed case sets differ between ranked runs ({short} of {leaderboard.height} lack some "
                       f"of the {union} cases any of them completed): each pair is compared on the cases both "
                       "completed (pairwise n_cases); leaderboard means and ranks use each run's own cases"))
    tagged.append((RUNS, INTERVAL_NOTE))
    tagged += [(RUNS + PAIRS, n) for n in samples_note(data, chosen.run_ids)]
    tagged += [(RUNS + PAIRS, n) for n in small_sample_note(result.smallest_benchmark)]
    notes, note_sections = [n for _, n in tagged], tuple(about for about, _ in tagged)
    return Comparison(leaderboard, result.benchmarks.rename({"unit": "run_id"}), result.pairwise,
                      result.ranks.rename({"unit": "run_id"}), chosen.excluded, notes, not_ranked, result.versus,
                      result.separability, options.baseline, result.separation, note_sections)


def answers_per_case(data: RunData, run_ids: list[str]) -> dict[str, int]:
    """Run -> K, the most answer samples any of its cases has (1: asked once), in ``run_ids`` order."""
    answers = with_sample(data.answers).filter(pl.col("run_id").is_in(run_ids))
    most = dict(answers.group_by("run_id", "case_id").agg(pl.col("sample").n_unique().alias("k"))
                .group_by("run_id").agg(pl.col("k").max()).iter_rows())
    return {run: int(most.get(run) or 1) for run in run_ids}


def samples_note(data: RunData, run_ids: list[str]) -> list[str]:
    """Where some run has K > 1: its case scores average K answers, so every interval here includes answer
    variance already (resampling answers within cases too would count it twice)."""
    many = {run: k for run, k in answers_per_case(data, run_ids).items() if k > 1}
    if not many:
        return []
    counts = sorted(set(many.values()))
    who = (f"{'run' if len(many) == 1 else 'runs'} {', '.join(many)} "
           f"{'has' if len(many) == 1 else 'have'} {counts[0]}" if len(counts) == 1 else
           f"runs {', '.join(f'{r} ({k})' for r, k in many.items())} have several")
    return [f"{who} answers per case: each case score averages its answers, so the intervals and paired tests "
            "include answer (and judge) variance; pairs stay paired by case"]


def leaderboard_order(data: RunData, selection: JudgeSelection = JudgeSelection()) -> list[str]:
    """The runs of ``data`` in leaderboard order (ranked, then not ranked, then left out), the order every
    table and figure lists runs in; store order when no run can be compared. Few resamples: they change
    ranks' intervals, never the order."""
    try:
        cmp = compare_data(data, CompareOptions(resamples=ResampleSettings(samples=100, seed=0), selection=selection))
    except ValueError:
        return data.runs["run_id"].to_list()
    return cmp.run_order(data.runs["run_id"].to_list())
