"""Physician labels set against the judge: one label per item, the judge's accuracy per item class, the
physicians' own agreement (the ceiling) and the physicians' case scores.

Labels come as the ``human_labels`` table's rows (``toolkit.labels.read_labels``). Several reviewers of one
item combine to the majority of their ``met`` / ``not_met`` labels; a tie goes to the earliest label
(``labelled_at``, then reviewer name). An item only ever labelled ``unsure`` has no physician label: it is
counted, and its answer gets no physician score. The judge is the run's primary judge, pass 1 (its latest
valid reply; ``--judge`` / ``--pass`` choose another judge and pass): one judging of each answer, the
decision the judge's accuracy is about.

Item classes: sign of the points (positive, negative, zero) and, for f1_weighted_rubric items, the severity
class of ``toolkit.protocol`` ("class 9" = a +3 item ... "class 1" = a -3 item).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.analysis.physician_stats import (case_bootstrap, cluster_share, kappa_jackknife, kappa_tables,
                                              pair_kappa_tables, share_interval)
from toolkit.scoring import with_sample
from toolkit.selection import JudgeSelection, RunData, scored_passes, select_judgments

KEY = ["run_id", "case_id", "sample", "item_id"]
MET, NOT_MET, UNSURE = "met", "not_met", "unsure"
ALL_ITEMS = "all items"
SIGN_CLASSES = ("positive", "negative", "zero")
SEVERITY_CLASSES = tuple(f"class {c}" for c in (9, 8, 7, 5, 3, 2, 1))
JUDGE_PASS = 1


def _ordered(labels: pl.DataFrame) -> pl.DataFrame:
    """Definite labels, earliest first (unknown times last, then by reviewer)."""
    return (with_sample(labels).filter(pl.col("label").is_in([MET, NOT_MET]))
            .sort(["labelled_at", "reviewer"], nulls_last=True, maintain_order=True))


def combine_labels(labels: pl.DataFrame) -> pl.DataFrame:
    """One row per run x case x sample x item labelled: ``physician`` (True = met; null when every label
    was unsure), ``labels`` (all of them), ``unsure`` and ``reviewers``."""
    labels = with_sample(labels).with_columns(pl.col("sample").cast(pl.Int32))
    counts = labels.group_by(KEY).agg(pl.len().alias("labels"), (pl.col("label") == UNSURE).sum().alias("unsure"),
                                      pl.col("reviewer").n_unique().alias("reviewers"))
    votes = _ordered(labels).group_by(KEY, maintain_order=True).agg(
        (pl.col("label") == MET).sum().alias("_met"), pl.len().alias("_definite"),
        pl.col("label").first().alias("_first"))
    twice = pl.col("_met") * 2
    verdict = (pl.when(twice > pl.col("_definite")).then(True).when(twice < pl.col("_definite")).then(False)
               .otherwise(pl.col("_first") == MET))
    out = counts.join(votes.with_columns(physician=verdict), on=KEY, how="left")
    return out.select(*KEY, "physician", pl.col("labels").cast(pl.Int64), pl.col("unsure").cast(pl.Int64),
                      pl.col("reviewers").cast(pl.Int64)).sort(KEY)


def with_classes(frame: pl.DataFrame) -> pl.DataFrame:
    """``sign`` and ``severity`` (null for points-rubric items) of rows carrying ``points`` and ``severity_class``."""
    return frame.with_columns(
        sign=pl.when(pl.col("points") > 0).then(pl.lit("positive")).when(pl.col("points") < 0)
        .then(pl.lit("negative")).otherwise(pl.lit("zero")),
        severity=pl.when(pl.col("severity_class").is_not_null()).then(pl.format("class {}", "severity_class")))


def rubric_of_runs(data: RunData) -> pl.DataFrame:
    """Rubric items keyed by run (each run's own dataset)."""
    return data.runs.select("run_id", "dataset_sha256").join(
        data.rubric_items.select("dataset_sha256", "case_id", "item_id", "benchmark", "grading_method", "points",
                                 "severity_class", "text"), on="dataset_sha256").drop("dataset_sha256")


def judge_pass(selection: JudgeSelection) -> int:
    """The one pass whose decisions are set against the physicians: the first selected (default: pass 1)."""
    return min(selection.passes) if selection.passes else JUDGE_PASS


def judge_items(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """Every decided item of the selected judge's (default: each run's primary judge) first selected pass:
    run, case, sample, item, ``judge`` and the rubric columns."""
    _, decisions = select_judgments(data, JudgeSelection(judge=selection.judge, passes=(judge_pass(selection),)))
    return with_classes(with_sample(decisions).select(*KEY, pl.col("matched").alias("judge")).join(
        rubric_of_runs(data), on=["run_id", "case_id", "item_id"], how="inner"))


def item_table(data: RunData, combined: pl.DataFrame, selection: JudgeSelection = JudgeSelection()
               ) -> tuple[pl.DataFrame, int]:
    """The labelled items with the judge's decision and their rubric columns, and how many labelled items
    match no judged item of the runs (a case, sample or item the run does not have)."""
    joined = combined.join(judge_items(data, selection), on=KEY, how="left")
    orphan = joined.filter(pl.col("judge").is_null()).height
    return joined.filter(pl.col("judge").is_not_null()), orphan


def class_frames(frame: pl.DataFrame):
    """(kind, class name, rows) for every item class present, in a fixed order."""
    yield "all", ALL_ITEMS, frame
    for kind, column, names in (("sign", "sign", SIGN_CLASSES), ("severity", "severity", SEVERITY_CLASSES)):
        for name in names:
            rows = frame.filter(pl.col(column) == name)
            if rows.height:
                yield kind, name, rows


def agreement_by_class(items: pl.DataFrame) -> pl.DataFrame:
    """Per item class: labelled items (unsure ones counted apart), the judge's sensitivity and specificity
    against the physicians and percent agreement with case-clustered logit intervals (``share_interval``),
    and Cohen's kappa with a jackknife interval over cases (``kappa_jackknife``; cases across runs)."""
    rows = []
    for kind, name, frame in class_frames(items):
        definite = frame.filter(pl.col("physician").is_not_null())
        p, j = pl.col("physician"), pl.col("judge")
        per_case = definite.group_by("case_id", maintain_order=True).agg(
            (p & j).sum().alias("tp"), (p & ~j).sum().alias("fn"), (~p & j).sum().alias("fp"),
            (~p & ~j).sum().alias("tn")).sort("case_id")
        counts = per_case.select("tp", "fn", "fp", "tn").to_numpy().astype(np.float64).reshape(-1, 4)
        tp, fn, fp, tn = counts.T
        row = {"kind": kind, "item_class": name, "items": definite.height, "unsure": frame.height - definite.height,
               "cases": per_case.height, "physician_met": int(tp.sum() + fn.sum()),
               "physician_not_met": int(fp.sum() + tn.sum())}
        for label, hits, trials in (("sensitivity", tp, tp + fn), ("specificity", tn, tn + fp),
                                    ("agreement", tp + tn, counts.sum(axis=1))):
            share, var = cluster_share(hits, trials)
            low, high = share_interval(share, var, int((trials > 0).sum()), float(trials.sum()))
            row |= {label: share, f"{label}_low": low, f"{label}_high": high, f"_{label}_var": var}
        # [physician yes & judge yes, physician yes only, judge yes only, both no]
        tables = np.stack([tp, fn, fp, tn], axis=1)
        row["kappa"] = float(kappa_tables(tables.sum(axis=0)))
        _, low, high = kappa_jackknife(tables)
        row["kappa_low"], row["kappa_high"] = float(low), float(high)
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.col(pl.Float64).fill_nan(None))


def physician_pairs(labels: pl.DataFrame, data: RunData, samples: int, seed: int) -> pl.DataFrame:
    """Per item class, over items two or more reviewers labelled met / not met: the first two labels' percent
    agreement and kappa (Fleiss' for rating pairs: reviewers vary per item), the physicians' own ceiling."""
    ordered = _ordered(labels).with_columns(pl.col("sample").cast(pl.Int32))
    pairs = ordered.group_by(KEY, maintain_order=True).agg(pl.col("label").head(2), pl.len().alias("_n")).filter(
        pl.col("_n") >= 2).with_columns(
        agree=pl.col("label").list.first() == pl.col("label").list.last(),
        met=(pl.col("label").list.eval(pl.element() == MET).list.sum()))
    pairs = with_classes(pairs.join(rubric_of_runs(data), on=["run_id", "case_id", "item_id"], how="inner"))
    rows = []
    for kind, name, frame in class_frames(pairs) if pairs.height else ():
        per_case = frame.group_by("case_id").agg(pl.col("agree").sum(), pl.len().alias("n"), pl.col("met").sum()
                                                 ).sort("case_id")
        tables = per_case.select("agree", "n", "met").to_numpy().astype(np.float64).reshape(-1, 3)
        low, high = case_bootstrap(tables, pair_kappa_tables, samples, seed)
        rows.append({"kind": kind, "item_class": name, "items": frame.height, "cases": per_case.height,
                     "agreement": float(tables[:, 0].sum() / tables[:, 1].sum()),
                     "kappa": float(pair_kappa_tables(tables.sum(axis=0))), "kappa_low": low, "kappa_high": high})
    schema = {"kind": pl.String, "item_class": pl.String, "items": pl.Int64, "cases": pl.Int64,
              "agreement": pl.Float64, "kappa": pl.Float64, "kappa_low": pl.Float64, "kappa_high": pl.Float64}
    return pl.DataFrame(rows, schema=schema).with_columns(pl.col(pl.Float64).fill_nan(None))


def judge_errors(items: pl.DataFrame, top: int) -> pl.DataFrame:
    """The rubric items the judge gets wrong most often against the physicians (over runs and samples)."""
    definite = items.filter(pl.col("physician").is_not_null())
    wrong = pl.col("physician") != pl.col("judge")
    return definite.group_by("case_id", "item_id", maintain_order=True).agg(
        pl.col("benchmark").first(), pl.col("points").first(), pl.len().alias("labelled"),
        (wrong & pl.col("judge")).sum().alias("judge_false_met"),
        (wrong & ~pl.col("judge")).sum().alias("judge_false_not_met"), pl.col("text").first(),
    ).with_columns(errors=pl.col("judge_false_met") + pl.col("judge_false_not_met")).filter(
        pl.col("errors") > 0).with_columns(error_rate=pl.col("errors") / pl.col("labelled")).sort(
        ["errors", "error_rate", "case_id", "item_id"], descending=[True, True, False, False]).head(top).select(
        "benchmark", "case_id", "item_id", "points", "labelled", "errors", "error_rate", "judge_false_met",
        "judge_false_not_met", "text")


def physician_sample_scores(data: RunData, combined: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The protocol's score of each answer (run x case x sample) whose every rubric item has a physician
    label, computed by ``toolkit.scoring`` from the labels in place of the judge's decisions; and how many
    labelled answers lack a label for some item (left out)."""
    rubric = rubric_of_runs(data)
    size = rubric.group_by("run_id", "case_id").agg(pl.len().alias("_items"))
    known = combined.join(rubric.select("run_id", "case_id", "item_id"), on=["run_id", "case_id", "item_id"],
                          how="semi")
    coverage = known.group_by("run_id", "case_id", "sample").agg(
        pl.col("physician").is_not_null().sum().alias("_labelled")).join(size, on=["run_id", "case_id"], how="inner")
    complete = coverage.filter(pl.col("_labelled") == pl.col("_items")).select("run_id", "case_id", "sample")
    decisions = known.join(complete, on=["run_id", "case_id", "sample"], how="semi").select(
        "run_id", "case_id", "sample", pl.lit("physician").alias("judge_model"),
        pl.lit(1, dtype=pl.Int32).alias("judge_pass"), "item_id", pl.col("physician").alias("matched"))
    scores = scored_passes(data, decisions).select("run_id", "case_id", "sample", pl.col("score").alias("physician"))
    return scores, coverage.height - complete.height
