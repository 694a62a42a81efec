"""Judge vs physicians: the judge's accuracy against physician labels, and the runs' scores corrected by them.

* ``agreement``: per item class, sensitivity, specificity, agreement and kappa of the judge's decision
  (each run's primary judge or ``selection.judge``; its first selected pass, default 1) against the
  physicians' (``toolkit.analysis.physician_labels``);
  ``physician_agreement``: the physicians among themselves, where items are double-graded (the ceiling).
* ``corrected``: each run's benchmark means by PPI++ (``physician_stats.ppi_mean``): Y is the physician case
  score (the protocol's score from the labels, averaged over the case's fully labelled answers), Yhat the
  judge's score of the same answers (the selected judge's mean over the selected passes, by default the
  number every other table shows), the unlabelled cases' judge scores borrow strength; lambda is tuned
  from 20 labelled cases in a benchmark, below that it is 1 (plain PPI). ``overall`` is the mean of the
  benchmark estimates, its variance the sum of theirs over B^2 (benchmarks independent), Student t with
  Satterthwaite degrees of freedom; when a benchmark has fewer than two labelled cases, one PPI++ over all
  cases weighted to the macro mean instead (``weighted_macro``, an interval from 20 labelled cases).
  Valid when the labelled cases are a random sample of the run's cases (the review page draws them at
  random); fewer than 10 labelled cases under an estimate: no interval.
* ``differences``: the same on the per-case difference of two runs graded on one dataset.
* ``rates``: each run's match rate per item class corrected by Rogan-Gladen (``physician_rates``): the
  physicians' own rate where the run's labels cover every item, else the run's own sensitivity and
  specificity from 20 labelled cases of it, else the class's pooled over the runs (said so, and flagged when
  it moves the rate against the run's own labels); delta-method normal interval, clipped to [0, 1]
  (conservative: it ignores that labelled items count in the observed rate too; simulated coverage 96-98%).
* ``plan``: labelled cases that would halve the width of each corrected overall interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations

import numpy as np
import polars as pl

from toolkit.analysis.compare import leaderboard_order
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.physician_labels import (agreement_by_class, class_frames, combine_labels, item_table,
                                               judge_errors, judge_items, judge_pass, physician_pairs,
                                               physician_sample_scores)
from toolkit.analysis.physician_rates import MIN_OWN, POOLED, corrected_rates
from toolkit.analysis.physician_stats import PPIMean, labels_to_halve, ppi_mean, satterthwaite
from toolkit.protocol import BENCHMARK_METHODS
from toolkit.selection import JudgeSelection, RunData, per_case, per_sample

OVERALL = "overall"
# Fewer labelled cases under an estimate than this and its interval under-covers in the simulations
# (tests/test_physicians_coverage.py: 88-91% at 4-8 cases): the estimate is shown without an interval.
MIN_LABELLED = 10
MIN_PER_BENCHMARK = 2  # a benchmark's variance needs two labelled cases
# Below this many labelled cases in a benchmark lambda is not tuned (a slope fitted on fewer cases is noise,
# and its interval under-covers) but fixed at N / (N + n): the judge's mean over every case plus the labelled
# cases' mean error, so a judge that agrees with the physicians corrects nothing (``fixed_lambda``).
MIN_TUNED = 20
# The overall mean when a benchmark has too few labelled cases of its own (``weighted_macro``) is shown
# without an interval: it is used exactly when the labels missed a benchmark, and then its variance misses
# that benchmark's share (coverage 0-69% in simulation with unequal benchmarks).
UNBALANCED = ("a benchmark has fewer than 2 labelled cases: no valid 95% interval (label at least 2 cases in "
              "every benchmark; `bedside review` draws them so)")
METHOD_NOTE = ("corrected = PPI++ (power-tuned prediction-powered inference) per benchmark from physician case "
               "scores of the labelled cases and judge scores of all cases (below 20 labelled cases: the judge's mean "
               "over all cases plus the labelled cases' mean error); "
               "overall = mean over benchmarks; 95% Student t intervals, cut to the scores' range; valid when the "
               "labelled cases are a random sample of the cases within each benchmark")


@dataclass(frozen=True, kw_only=True)
class PhysicianOptions:
    resamples: ResampleSettings = field(default_factory=ResampleSettings)  # the physicians' kappa: case bootstrap
    selection: JudgeSelection = field(default_factory=JudgeSelection)  # the judge checked and corrected
    top: int = 10
    min_labelled: int = MIN_LABELLED


@dataclass(frozen=True, eq=False)
class PhysicianCheck:
    agreement: pl.DataFrame  # per item class: judge vs physicians
    physician_agreement: pl.DataFrame  # per item class: physician vs physician (double-graded items)
    corrected: pl.DataFrame  # per run x benchmark (and overall): judge mean, corrected mean and interval
    differences: pl.DataFrame  # per run pair x benchmark (and overall)
    rates: pl.DataFrame  # per run x item class: judge and corrected match rates
    judge_errors: pl.DataFrame  # items the judge gets wrong most often
    plan: pl.DataFrame  # per run: labelled cases to halve the overall interval
    notes: list[str] = field(default_factory=list)

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"agreement": self.agreement, "physician_agreement": self.physician_agreement,
                "corrected": self.corrected, "differences": self.differences, "rates": self.rates,
                "judge_errors": self.judge_errors, "plan": self.plan}


def _benchmark_order(names: list[str]) -> list[str]:
    known = [b for b in BENCHMARK_METHODS if b in names]
    return known + sorted(b for b in names if b not in BENCHMARK_METHODS)


def case_table(data: RunData, combined: pl.DataFrame, selection: JudgeSelection = JudgeSelection()
               ) -> tuple[pl.DataFrame, int]:
    """Per run x judge-scored case: benchmark, judge (the case score), and for labelled cases ``physician``
    and ``judge_labelled`` (both over the fully labelled answers) and ``labels``; plus the labelled answers
    left out for an unlabelled or unsure item."""
    scores, partial = physician_sample_scores(data, combined)
    judged = per_sample(data, selection).select("run_id", "case_id", "sample", pl.col("score").alias("_judge"))
    counts = combined.group_by("run_id", "case_id", "sample").agg(pl.col("labels").sum())
    labelled = scores.join(judged, on=["run_id", "case_id", "sample"], how="inner").join(
        counts, on=["run_id", "case_id", "sample"], how="left").group_by("run_id", "case_id").agg(
        pl.col("physician").mean(), pl.col("_judge").mean().alias("judge_labelled"), pl.col("labels").sum())
    cases = per_case(data, selection).select("run_id", "case_id", "benchmark", pl.col("score").alias("judge"))
    return cases.join(labelled, on=["run_id", "case_id"], how="left").sort("run_id", "case_id"), partial


def _estimate(frame: pl.DataFrame, value: str, labelled_value: str, truth: str) -> PPIMean | None:
    """PPI++ over one benchmark's rows: ``truth`` where labelled, ``labelled_value`` the judge's there."""
    lab = frame.filter(pl.col(truth).is_not_null())
    if lab.height < MIN_PER_BENCHMARK:
        return None
    rest = frame.filter(pl.col(truth).is_null())
    lam = None if lab.height >= MIN_TUNED else fixed_lambda(lab.height, rest.height)
    return ppi_mean(lab[truth].to_numpy(), lab[labelled_value].to_numpy(), rest[value].to_numpy(), lam=lam)


def fixed_lambda(labelled: int, unlabelled: int) -> float:
    """lambda = N / (N + n): then lambda mean(Yhat, unlabelled) + mean(Y - lambda Yhat, labelled) equals
    mean(Yhat, every case) + mean(Y - Yhat, labelled). Fixed by the design, not the data: unbiased."""
    return unlabelled / (unlabelled + labelled)


def _row(est: PPIMean | None, enough: bool, why: str) -> dict:
    if est is None:
        return {"mean": None, "ci_low": None, "ci_high": None, "se": None, "lam": None, "ci_note": why}
    note = None if enough else why
    return {"mean": est.mean, "ci_low": est.ci_low if enough else None, "ci_high": est.ci_high if enough else None,
            "se": est.se, "lam": est.lam, "ci_note": note}


def macro_mean(parts: list[PPIMean]) -> PPIMean:
    """The mean of independent benchmark estimates: variance sum(se_b^2) / B^2, Satterthwaite df."""
    b = len(parts)
    terms = [(p.se ** 2 / b ** 2, p.df) for p in parts]
    return PPIMean(sum(p.mean for p in parts) / b, math.sqrt(sum(v for v, _ in terms)), math.nan,
                   sum(p.labelled for p in parts), sum(p.unlabelled for p in parts), math.nan, math.nan,
                   satterthwaite(terms))


def weighted_macro(frame: pl.DataFrame, value: str, labelled_value: str, truth: str) -> PPIMean | None:
    """The macro mean when some benchmark has too few labelled cases for its own estimate: one PPI++ over all
    cases with each case weighted by T / (B T_b) (T cases in all, T_b in its benchmark, B benchmarks), so the
    weighted mean is the mean over benchmarks. Valid when the labelled cases are a random sample of all the
    run's cases, as the review page draws them."""
    sizes = frame.group_by("benchmark").agg(pl.len().alias("_t"))
    weighted = frame.join(sizes, on="benchmark").with_columns(
        _w=pl.lit(frame.height / sizes.height) / pl.col("_t"))
    lab = weighted.filter(pl.col(truth).is_not_null())
    if lab.height < MIN_PER_BENCHMARK:
        return None
    rest = weighted.filter(pl.col(truth).is_null())
    lam = None if lab.height >= MIN_TUNED else fixed_lambda(lab.height, rest.height)
    w = lab["_w"].to_numpy()
    est = ppi_mean(w * lab[truth].to_numpy(), w * lab[labelled_value].to_numpy(),
                   rest["_w"].to_numpy() * rest[value].to_numpy(), lam=lam)
    return replace(est, skew=0.0)  # an overall: the symmetric t interval, as ``macro_mean`` gives


def _estimates(frame: pl.DataFrame, keys: dict, value: str, labelled_value: str, truth: str, minimum: int
               ) -> tuple[list[dict], list[PPIMean | None], list[int]]:
    """Rows per benchmark and overall for one run (or pair) of ``frame`` (benchmark, value, labelled_value,
    truth, labels)."""
    rows, parts, totals = [], [], []
    few = f"fewer than {minimum} labelled cases: no valid 95% interval"
    parts_of = frame.partition_by("benchmark", as_dict=True)
    for bench in _benchmark_order([k[0] for k in parts_of]):
        mine = parts_of[(bench,)]
        est = _estimate(mine, value, labelled_value, truth)
        n = int(mine[truth].is_not_null().sum())  # also when too few for an estimate: say how many there are
        why = f"{n} labelled case(s): too few to correct" if est is None else few
        rows.append({**keys, "benchmark": bench, "judge_mean": mine[value].mean(), **_row(est, n >= minimum, why),
                     "labelled_cases": n, "labels": int(mine["labels"].sum() or 0), "cases": mine.height})
        parts.append(est)
        totals.append(mine.height)
    whole = bool(parts) and all(p is not None for p in parts)
    macro = macro_mean(parts) if whole else weighted_macro(frame, value, labelled_value, truth)
    n = int(frame[truth].is_not_null().sum()) if macro is None else macro.labelled
    why = ("too few labelled cases to correct" if macro is None
           else f"fewer than {minimum} labelled cases: no valid 95% interval" if whole else UNBALANCED)
    judge = float(np.mean([r["judge_mean"] for r in rows])) if rows else None
    rows.append({**keys, "benchmark": OVERALL, "judge_mean": judge, **_row(macro, whole and n >= minimum, why),
                 "labelled_cases": n, "labels": sum(r["labels"] for r in rows), "cases": sum(totals)})
    return rows, parts, totals


ESTIMATE_SCHEMA = {"benchmark": pl.String, "judge_mean": pl.Float64, "mean": pl.Float64, "ci_low": pl.Float64,
                   "ci_high": pl.Float64, "ci_note": pl.String, "se": pl.Float64, "lam": pl.Float64,
                   "labelled_cases": pl.Int64, "labels": pl.Int64, "cases": pl.Int64}


def corrected_means(cases: pl.DataFrame, run_ids: list[str], minimum: int = MIN_LABELLED
                    ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per run x benchmark and overall: judge-only and corrected means; and the per-run label plan."""
    rows, plan = [], []
    by_run = cases.partition_by("run_id", as_dict=True)
    for run in run_ids:
        mine = by_run.get((run,))
        if mine is None:
            continue
        out, parts, totals = _estimates(mine, {"run_id": run}, "judge", "judge_labelled", "physician", minimum)
        rows += out
        overall = out[-1]
        needed = labels_to_halve(parts, totals) if all(p is not None for p in parts) else None
        width = None if overall["ci_low"] is None else overall["ci_high"] - overall["ci_low"]
        why = None
        if overall["mean"] is None:
            why = "no corrected estimate yet: label more cases"
        elif any(p is None for p in parts):
            why = "a benchmark has fewer than 2 labelled cases: label cases in every benchmark first"
        elif needed is None:
            why = "labelling every case would not halve it"
        plan.append({"run_id": run, "labelled_cases": overall["labelled_cases"], "cases": overall["cases"],
                     "ci_width": width, "labelled_to_halve": needed,
                     "more_labelled": None if needed is None else needed - overall["labelled_cases"], "note": why})
    schema = {"run_id": pl.String, **ESTIMATE_SCHEMA}
    plan_schema = {"run_id": pl.String, "labelled_cases": pl.Int64, "cases": pl.Int64, "ci_width": pl.Float64,
                   "labelled_to_halve": pl.Int64, "more_labelled": pl.Int64, "note": pl.String}
    return _bounded(pl.DataFrame(rows, schema=schema), 0.0), pl.DataFrame(plan, schema=plan_schema)


def _bounded(frame: pl.DataFrame, low: float) -> pl.DataFrame:
    """Intervals kept within what a score (low 0) or a difference of two (low -1) can be: the truth lies
    there, so cutting the rest loses no coverage."""
    frame = frame.with_columns(pl.col(pl.Float64).fill_nan(None))
    return frame.with_columns(pl.col("ci_low").clip(low, 1.0), pl.col("ci_high").clip(low, 1.0))


def corrected_differences(cases: pl.DataFrame, data: RunData, run_ids: list[str], minimum: int = MIN_LABELLED
                          ) -> pl.DataFrame:
    """Per two runs of one dataset (first minus second, in ``run_ids`` order), per benchmark and overall:
    the judge-only and corrected mean difference over the cases both scored."""
    dataset = dict(data.runs.select("run_id", "dataset_sha256").iter_rows())
    rows = []
    for a, b in combinations([r for r in run_ids if r in dataset], 2):
        if dataset[a] != dataset[b]:
            continue
        left = cases.filter(pl.col("run_id") == a).drop("run_id")
        right = cases.filter(pl.col("run_id") == b).drop("run_id", "benchmark")
        both = left.join(right, on="case_id", how="inner", suffix="_b").select(
            "benchmark", (pl.col("judge") - pl.col("judge_b")).alias("judge"),
            (pl.col("judge_labelled") - pl.col("judge_labelled_b")).alias("judge_labelled"),
            (pl.col("physician") - pl.col("physician_b")).alias("physician"),
            (pl.col("labels").fill_null(0) + pl.col("labels_b").fill_null(0)).alias("labels"))
        if both.height:
            rows += _estimates(both, {"run_a": a, "run_b": b}, "judge", "judge_labelled", "physician", minimum)[0]
    return _bounded(pl.DataFrame(rows, schema={"run_a": pl.String, "run_b": pl.String, **ESTIMATE_SCHEMA}), -1.0)


def judge_vs_physicians(data: RunData, labels: pl.DataFrame, options: PhysicianOptions = PhysicianOptions()
                        ) -> PhysicianCheck:
    """The whole check for the runs of ``data`` from ``labels`` (``human_labels`` rows of those runs), runs in
    leaderboard order as every table lists them."""
    run_ids = leaderboard_order(data, options.selection)
    labels = labels.filter(pl.col("run_id").is_in(run_ids))
    labelled = [r for r in run_ids if r in set(labels["run_id"].to_list())]
    if not labelled:
        raise ValueError(f"calibrate: no physician labels for run(s) {', '.join(run_ids)} "
                         "(make them with `bedside review` and `bedside labels import`)")
    combined = combine_labels(labels)
    selection = options.selection
    items, orphan = item_table(data, combined, selection)
    if items.is_empty():
        raise ValueError("calibrate: no physician label matches an item the judge decided in these runs")
    samples, seed = options.resamples.samples, options.resamples.seed
    agreement = agreement_by_class(items)
    cases, partial = case_table(data, combined, selection)
    corrected, plan = corrected_means(cases, labelled, options.min_labelled)
    notes = [METHOD_NOTE,
             f"judge accuracy: {selection.judge or 'each run’s primary judge'}, pass {judge_pass(selection)}; "
             "corrected: its scores over the selected passes; several reviewers: their majority, a tie to the "
             "earliest label; intervals: logit with a case-clustered variance and t at cases - 1 df (sensitivity, "
             "specificity, agreement), jackknife over cases of log(1 - kappa) (kappa)",
             "corrected rates: the physicians' rate where a run's labels cover every item; else Rogan-Gladen with the "
             f"run's own sensitivity and specificity (from {MIN_OWN} labelled cases of it with met and not-met "
             "items), else with those pooled over the runs; clipped to [0, 1]"]
    rates = corrected_rates(data, agreement, labelled, selection, items)
    borrowed = rates.filter(pl.col("accuracy_from") == POOLED)
    if borrowed.height:
        shown = ", ".join(f"{r} {c}" for r, c in borrowed.select("run_id", "item_class").head(5).iter_rows())
        notes.append(f"corrected rates of {borrowed.height} run x class(es) ({shown}"
                     f"{', ...' if borrowed.height > 5 else ''}) use the judge's accuracy pooled over runs: "
                     f"fewer than {MIN_OWN} labelled cases of the run, or no met or no not-met item among them")
    if rates["against_labels"].any():
        notes.append("a corrected rate flagged against_labels moves away from what the run's own labelled items "
                     "show: the pooled accuracy does not fit this run; label more of its cases")
    unsure = int(combined["physician"].is_null().sum())
    if unsure:
        notes.append(f"{unsure} labelled item(s) only ever marked unsure: left out of accuracy and scores")
    if partial:
        notes.append(f"{partial} labelled answer(s) lack a physician label for some item: no physician score")
    if orphan:
        notes.append(f"{orphan} labelled item(s) match no judged item of these runs: left out")
    unlabelled = [r for r in run_ids if r not in labelled]
    if unlabelled:
        notes.append(f"no physician labels for run(s) {', '.join(unlabelled)}: not corrected")
    if corrected["ci_note"].is_not_null().any():
        notes.append(f"an estimate resting on fewer than {options.min_labelled} labelled cases has no interval: "
                     "in simulation such intervals under-cover")
    return PhysicianCheck(
        agreement.select(pl.exclude("^_.*$")), physician_pairs(labels, data, samples, seed), corrected,
        corrected_differences(cases, data, labelled, options.min_labelled),
        rates, judge_errors(items, options.top), plan, notes)


def calibrate(store, run_ids: list[str] | None = None, labels: pl.DataFrame | None = None,
              options: PhysicianOptions = PhysicianOptions()) -> PhysicianCheck:
    """``judge_vs_physicians`` of stored runs (default: every run) with their stored labels (``labels``:
    ``human_labels`` rows to use instead)."""
    from toolkit.selection import read_runs
    from toolkit.store import Store

    store = store if isinstance(store, Store) else Store.open(store)
    ids = list(dict.fromkeys(run_ids)) if run_ids else store.run_ids()
    if labels is None:
        from toolkit.labels import read_labels  # the labels table's own reader

        labels = read_labels(store, ids)
    return judge_vs_physicians(read_runs(store, ids, texts=False), labels, options)


def plan_labels(check_or_store, run_ids: list[str] | None = None, labels: pl.DataFrame | None = None,
                options: PhysicianOptions = PhysicianOptions()) -> pl.DataFrame:
    """Per run: labelled cases now, the width of the corrected overall interval, and how many labelled
    cases in all (``labelled_to_halve``; ``more_labelled`` beyond today's) would halve it, from the
    estimated variances (``physician_stats.labels_to_halve``). Takes a ``PhysicianCheck`` or what
    ``calibrate`` takes."""
    check = check_or_store if isinstance(check_or_store, PhysicianCheck) else calibrate(
        check_or_store, run_ids, labels, options)
    return check.plan
