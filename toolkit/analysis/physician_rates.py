"""Item match rates per run x item class, corrected by the judge's accuracy against physician labels
(Rogan-Gladen, ``physician_stats.rogan_gladen``), never against what a run's own labels show.

Which accuracy corrects a run's class (``accuracy_from``):

* ``labels cover the run``: every judged item of the class has a physician label; the rate IS the
  physicians' rate (the labels are taken as the truth), its interval the case-clustered one of that share.
* ``this run's labels``: the run's own sensitivity and specificity, from at least ``MIN_OWN`` labelled cases
  of the run with physician-met and physician-not-met items among them: the judge's accuracy may differ
  between runs (a model's answers can be easier or harder to grade), so another run's errors do not
  correct this one.
* ``pooled over runs``: fewer labels than that; the class's accuracy over every labelled run, said so.

A corrected rate that moves from the judge's rate in the direction opposite to the one the run's own
labelled items show (physicians' rate there minus the judge's on the same items; or moves at all when
they show no error) is flagged (``against_labels``).
"""

from __future__ import annotations

import math

import polars as pl

from toolkit.analysis.physician_labels import class_frames, judge_items
from toolkit.analysis.physician_stats import Z, Corrected, cluster_share, rogan_gladen
from toolkit.selection import JudgeSelection, RunData

# Labelled cases of a run (in a class) from which its own sensitivity and specificity correct it: with
# fewer the interval under-covers (tests/test_physicians_rates.py: 92.5% at 10 labelled cases, 96% at 20).
MIN_OWN = 20
COVERED, OWN, POOLED = "labels cover the run", "this run's labels", "pooled over runs"
UNKNOWN = "not correctable: the judge's accuracy here is unknown or no better than chance"
AGAINST = "moves away from the run's own labels"
SCHEMA = {"run_id": pl.String, "kind": pl.String, "item_class": pl.String, "items": pl.Int64,
          "judge_rate": pl.Float64, "rate": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
          "ci_note": pl.String, "harm": pl.String, "accuracy_from": pl.String, "labelled_items": pl.Int64,
          "labelled_cases": pl.Int64, "labelled_rate": pl.Float64, "labelled_judge_rate": pl.Float64,
          "against_labels": pl.Boolean}


def _num(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else float(value)


def _share(frame: pl.DataFrame, hit: pl.Expr, among: pl.Expr | None = None) -> tuple[float, float]:
    """(share, case-clustered variance) of ``hit`` over the rows of ``frame`` where ``among`` holds."""
    rows = frame if among is None else frame.filter(among)
    per_case = rows.group_by("case_id").agg(hit.sum().alias("m"), pl.len().alias("n"))
    return cluster_share(per_case["m"].to_numpy(), per_case["n"].to_numpy())


def _accuracy(labelled: pl.DataFrame) -> tuple[float, float, float, float] | None:
    """The run's own (sensitivity, its variance, specificity, its variance), or None with too few labels."""
    met = labelled["physician"]
    if labelled["case_id"].n_unique() < MIN_OWN or met.all() or not met.any():
        return None
    sens, sens_var = _share(labelled, pl.col("judge"), pl.col("physician"))
    spec, spec_var = _share(labelled, ~pl.col("judge"), ~pl.col("physician"))
    return sens, _num(sens_var), spec, _num(spec_var)


def corrected_rates(data: RunData, agreement: pl.DataFrame, run_ids: list[str],
                    selection: JudgeSelection = JudgeSelection(), labelled: pl.DataFrame | None = None
                    ) -> pl.DataFrame:
    """Per run x item class: the judge's match rate (its pass set against the labels, all judged items) and
    the corrected rate with a normal interval from the delta-method variance (items clustered by case),
    clipped to [0, 1]; ``labelled``: the labelled items with the judge's decisions (``item_table``), the
    pooled accuracy in ``agreement``. Class 9's miss rate is the severe-omission rate, class 1's match rate
    the severe-commission rate."""
    pooled = {r["item_class"]: r for r in agreement.iter_rows(named=True)}
    items = judge_items(data, selection)
    definite = (labelled if labelled is not None else items.clear().with_columns(physician=pl.lit(None, pl.Boolean))
                ).filter(pl.col("physician").is_not_null())
    rows = []
    for run in run_ids:
        mine, labels = items.filter(pl.col("run_id") == run), definite.filter(pl.col("run_id") == run)
        labelled_classes = {name: frame for _, name, frame in class_frames(labels)}
        for kind, name, frame in class_frames(mine):
            rows.append(_rate_row(run, kind, name, frame, labelled_classes.get(name, labels.clear()),
                                  pooled.get(name)))
    return pl.DataFrame(rows, schema=SCHEMA).with_columns(pl.col(pl.Float64).fill_nan(None))


def _rate_row(run: str, kind: str, name: str, frame: pl.DataFrame, labels: pl.DataFrame, pooled: dict | None
              ) -> dict:
    observed, var = _share(frame, pl.col("judge"))
    lab_rate = _share(labels, pl.col("physician"))[0] if labels.height else None
    lab_judge = float(labels["judge"].mean()) if labels.height else None
    if labels.height == frame.height:  # labels cover every item: the physicians' share, its sampling error
        source, (truth, truth_var) = COVERED, _share(labels, pl.col("physician"))
        fix = Corrected(truth, _num(truth_var), False)  # the labels are the truth: nothing to correct
    else:
        own = _accuracy(labels)
        if own is not None:
            source, fix = OWN, rogan_gladen(observed, _num(var), *own)
        elif pooled is not None and None not in (pooled["sensitivity"], pooled["specificity"]):
            source = POOLED
            fix = rogan_gladen(observed, _num(var), pooled["sensitivity"], _num(pooled["_sensitivity_var"]),
                               pooled["specificity"], _num(pooled["_specificity_var"]))
        else:
            source, fix = POOLED, None
    ok = fix is not None and not math.isnan(fix.rate)
    against = False
    if ok and source != COVERED and lab_rate is not None:
        shown, moved = lab_rate - lab_judge, fix.rate - observed
        against = (shown * moved < 0) or (shown == 0 and abs(moved) > 1e-12)
    # A delta-method variance of 0 (every item one way, a perfect judge) is no interval
    spread = ok and not math.isnan(fix.variance) and fix.variance > 0
    half = Z * math.sqrt(fix.variance) if spread else None
    note = None if ok else UNKNOWN
    if ok and fix.clipped:
        note = "clipped to [0, 1]"
    elif ok and not spread:
        note = "no interval: no spread to estimate it from"
    if against:
        note = "; ".join(filter(None, [note, f"{AGAINST} (physicians {lab_rate:.3f}, judge {lab_judge:.3f} "
                                             f"on its {labels.height} labelled items)"]))
    return {"run_id": run, "kind": kind, "item_class": name, "items": frame.height, "judge_rate": observed,
            "rate": fix.rate if ok else None,
            "ci_low": max(fix.rate - half, 0.0) if half is not None else None,
            "ci_high": min(fix.rate + half, 1.0) if half is not None else None, "ci_note": note,
            "harm": {"class 9": "severe omission rate = 1 - rate", "class 1": "severe commission rate = rate"}.get(name),
            "accuracy_from": source, "labelled_items": labels.height,
            "labelled_cases": labels["case_id"].n_unique() if labels.height else 0,
            "labelled_rate": lab_rate, "labelled_judge_rate": lab_judge, "against_labels": against}
