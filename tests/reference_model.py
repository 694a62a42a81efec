"""A deliberately plain, row-by-row model of the reference runner, used as the oracle in tests.

It scores, writes result rows and summarises the way the upstream runner does,
with Python lists, ``random.Random`` and ``statistics``; nothing is vectorised.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import statistics
from typing import Any

PROTOCOL = "bedside-bench-grading-v1"
CLASS = {3: 9, 2: 8, 1: 7, 0: 5, -1: 3, -2: 2, -3: 1}
WEIGHT = {9: 72.0, 8: 24.0, 7: 3.0, 5: 1.0, 3: 3.0, 2: 24.0, 1: 72.0}


def score_case(case: dict, matched: dict[str, bool]) -> tuple[float, dict]:
    items = case["rubric_items"]
    if case["grading_method"] == "points_rubric":
        available = sum(max(float(i["points"]), 0.0) for i in items)
        got = sum(float(i["points"]) for i in items if matched[i["item_id"]])
        raw = got / available
        return min(1.0, max(0.0, raw)), {"matched_signed_points": got, "available_positive_points": available,
                                         "raw_score": raw}
    klass = {i["item_id"]: CLASS[int(i["points"])] for i in items}
    recall_den = sum(WEIGHT[k] for k in klass.values() if k >= 7)
    recall_num = sum(WEIGHT[klass[i]] for i in klass if klass[i] >= 7 and matched[i])
    recall = recall_num / recall_den if recall_den > 0 else 0.0
    chosen = [i for i in klass if matched[i]]
    prec_den = sum(WEIGHT[klass[i]] for i in chosen)
    precision = recall_num / prec_den if prec_den > 0 else math.nan
    if math.isnan(precision) or precision + recall <= 0:
        f1 = 0.0
    else:
        f1 = 2.0 * precision * recall / (precision + recall)
    severe = any((klass[i] == 9 and not matched[i]) or (klass[i] == 1 and matched[i]) for i in klass)
    return float(round(f1, 4) or 0.0), {
        "f1_weighted": round(f1, 4), "precision_weighted": None if math.isnan(precision) else round(precision, 4),
        "recall_weighted": round(recall, 4), "severe_rate": 1.0 if severe else 0.0}


def make_rows(cases: list[dict], seed: int, error_rate: float = 0.1, retry_rate: float = 0.5,
              answer_model: str = "model-a", judge_model: str = "judge-x") -> list[dict]:
    """Result rows in a shuffled completion order, with failures and later successful retries."""
    rng = random.Random(seed)
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    order = cases[:]
    rng.shuffle(order)
    pending = []
    rows = []

    def success(case: dict, k: int) -> dict:
        skill = rng.random()
        matched = {i["item_id"]: rng.random() < (skill if i["points"] > 0 else 1 - skill) for i in case["rubric_items"]}
        score, comps = score_case(case, matched)
        start = t0 + dt.timedelta(seconds=k * 7 + rng.random())
        end = start + dt.timedelta(seconds=1 + rng.random() * 30)
        return {"protocol_version": PROTOCOL, "case_id": case["case_id"], "benchmark": case["benchmark"],
                "grading_method": case["grading_method"], "answer_model": answer_model, "judge_model": judge_model,
                "answer_reasoning_effort": None, "answer_temperature": 1 if rng.random() > 0.05 else None,
                "judge_temperature": 0, "started_at": start.isoformat(), "finished_at": end.isoformat(),
                "elapsed_seconds": (end - start).total_seconds(), "answer": f"answer {k}",
                "decisions": [{"item_id": i["item_id"], "points": i["points"], "matched": matched[i["item_id"]]}
                              for i in case["rubric_items"]], "score": score, "score_components": comps}

    def failure(case: dict, k: int) -> dict:
        end = t0 + dt.timedelta(seconds=k * 7 + 3)
        return {"protocol_version": PROTOCOL, "case_id": case["case_id"], "benchmark": case["benchmark"],
                "grading_method": case["grading_method"], "answer_model": answer_model, "judge_model": judge_model,
                "finished_at": end.isoformat(), "error": "RuntimeError: API request failed after 6 attempts: HTTP 503"}

    for k, case in enumerate(order):
        if rng.random() < error_rate:
            rows.append(failure(case, k))
            if rng.random() < retry_rate:
                pending.append(case)
        else:
            rows.append(success(case, k))
    for k, case in enumerate(pending, start=len(order)):  # a rerun that completes some failed cases
        rows.append(success(case, k) if rng.random() < 0.8 else failure(case, k))
    # A few cases succeed twice (files concatenated by hand): the last success wins, the first keeps its place.
    for k, case in enumerate(order[:3], start=2 * len(order)):
        rows.append(success(case, k))
    return rows


def nothing_matched(case: dict, row: dict) -> dict:
    """``row`` re-judged with every rubric item unmatched, scored by ``score_case`` (the reference's sums
    over no matched item start from the integer 0, so ``matched_signed_points`` is written as ``0``)."""
    decisions = [{**d, "matched": False} for d in row["decisions"]]
    score, comps = score_case(case, {d["item_id"]: False for d in decisions})
    return {**row, "decisions": decisions, "score": score, "score_components": comps}


def write_rows(path, rows: list[dict]) -> None:
    """The runner's append path: one ``json.dumps(row, ensure_ascii=False)`` line per attempt, LF-terminated."""
    with open(path, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def summary_path(path) -> str:
    text = str(path)
    return text[: -len(".jsonl")] + ".summary.json" if text.endswith(".jsonl") else text + ".summary.json"


def write_summary(path, summary: dict) -> None:
    """The runner's summary file beside its output: ``json.dumps(summary, indent=2)`` and a newline."""
    with open(summary_path(path), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(summary, indent=2) + "\n")


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return ordered[lo]
    frac = pos - lo
    return ordered[lo] * (1 - frac) + ordered[hi] * frac


def summarize(rows: list[dict], samples: int, seed: int, expected: set[str], digest: str) -> dict[str, Any]:
    done: dict[str, dict] = {}
    for row in rows:
        if "score" in row and not row.get("error") and row["case_id"] in expected:
            done[row["case_id"]] = row
    groups: dict[str, list[float]] = {}
    for row in done.values():
        groups.setdefault(row["benchmark"], []).append(float(row["score"]))
    rng = random.Random(seed)
    benchmarks = {}
    for name in sorted(groups):
        vals = groups[name]
        n = len(vals)
        means = [sum(vals[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples)]
        benchmarks[name] = {"n": n, "mean": statistics.fmean(vals),
                            "ci95": [_percentile(means, 0.025), _percentile(means, 0.975)]}
    overall, overall_ci = math.nan, [math.nan, math.nan]
    if groups:
        overall = statistics.fmean(statistics.fmean(v) for v in groups.values())
        boot = []
        for _ in range(samples):
            ms = []
            for name in sorted(groups):
                vals = groups[name]
                n = len(vals)
                ms.append(sum(vals[rng.randrange(n)] for _ in range(n)) / n)
            boot.append(statistics.fmean(ms))
        overall_ci = [_percentile(boot, 0.025), _percentile(boot, 0.975)]
    models = {(r.get("answer_model"), r.get("judge_model")) for r in done.values()}
    temps = {(r.get("answer_temperature"), r.get("judge_temperature")) for r in done.values()}
    relevant = [r for r in rows if r.get("case_id") in expected]
    last = {r.get("case_id"): r for r in relevant}
    starts = [r["started_at"] for r in relevant if r.get("started_at")]
    ends = [r["finished_at"] for r in relevant if r.get("finished_at")]
    temp = next(iter(temps)) if len(temps) == 1 else (None, None)
    return {
        "protocol_version": PROTOCOL, "dataset_sha256": digest,
        "answer_model": next(iter(models))[0] if len(models) == 1 else None,
        "judge_model": next(iter(models))[1] if len(models) == 1 else None,
        "answer_temperature": temp[0], "judge_temperature": temp[1], "judge_passes_per_answer": 1,
        "started_at": min(starts) if starts else None, "finished_at": max(ends) if ends else None,
        "completed_cases": len(done), "errors": sum(bool(r.get("error")) for r in last.values()),
        "overall_macro_mean": overall, "overall_ci95": overall_ci, "benchmarks": benchmarks,
        "bootstrap_samples": samples, "bootstrap_seed": seed,
    }
