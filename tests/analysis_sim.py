"""Simulated runs written through ``Store.write`` (rows per toolkit/tables.py), for the analysis tests
and the comparison benchmark: each run has a skill, each case a difficulty, each rubric item is
matched with a logistic probability, extra judge passes flip some of the first pass's decisions."""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.protocol import PROTOCOL_VERSION
from toolkit.store import Store


def simulate_decisions(dataset, run_id: str, skill: float, seed: int, judge: str = "judge-x", passes: int = 1,
                       flip: float = 0.05, failed: frozenset[str] = frozenset()) -> pl.DataFrame:
    """Decision rows (decisions table columns) of one run over every case not in ``failed``."""
    rng = np.random.default_rng(seed)
    items = dataset.rubric_items.filter(~pl.col("case_id").is_in(list(failed)))
    case_ids = items["case_id"].unique(maintain_order=True)
    difficulty = dict(zip(case_ids.to_list(), np.random.default_rng(7).normal(0.0, 1.0, case_ids.len())))
    d = np.array([difficulty[c] for c in items["case_id"].to_list()])
    points = items["points"].to_numpy()
    logit = np.where(points > 0, 0.8 + skill - d, np.where(points < 0, -1.5 - skill + 0.5 * d, -0.5))
    first = rng.random(points.size) < 1.0 / (1.0 + np.exp(-logit))
    frames = []
    for judge_pass in range(1, passes + 1):
        matched = first if judge_pass == 1 else first ^ (rng.random(points.size) < flip)
        frames.append(pl.DataFrame({
            "run_id": run_id, "case_id": items["case_id"], "judge_model": judge,
            "judge_pass": pl.Series([judge_pass] * points.size, dtype=pl.Int32), "item_id": items["item_id"],
            "matched": matched, "judgment_attempt": pl.Series([1] * points.size, dtype=pl.Int32)}))
    return pl.concat(frames)


def rule_decisions(dataset, run_id: str, matched: pl.Expr, judge: str = "judge-x", judge_pass: int = 1,
                   benchmarks: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Decision rows where ``matched`` is an expression over the rubric_items columns (e.g. points > 0)."""
    items = dataset.rubric_items
    if benchmarks is not None:
        items = items.filter(pl.col("benchmark").is_in(list(benchmarks)))
    return items.select(
        pl.lit(run_id).alias("run_id"), "case_id", pl.lit(judge).alias("judge_model"),
        pl.lit(judge_pass, dtype=pl.Int32).alias("judge_pass"), "item_id", matched.alias("matched"),
        pl.lit(1, dtype=pl.Int32).alias("judgment_attempt"))


def write_run(store: Store, dataset, run_id: str, skill: float, seed: int, *, judge: str = "judge-x",
              passes: int = 1, flip: float = 0.05, failed: frozenset[str] = frozenset(),
              created: int = 0, extra_judges: tuple[tuple[str, float], ...] = ()) -> None:
    """Write runs, answers, judgments and decisions rows of a simulated run (dataset stored too).

    ``extra_judges``: (judge model, flip rate) of further judges, each one pass, flipping the
    primary judge's first-pass decisions at that rate.
    """
    decisions = simulate_decisions(dataset, run_id, skill, seed, judge, passes, flip, failed)
    for k, (other, rate) in enumerate(extra_judges):
        base = decisions.filter(pl.col("judge_pass") == 1)
        flips = np.random.default_rng(seed + 1000 + k).random(base.height) < rate
        decisions = pl.concat([decisions, base.with_columns(
            judge_model=pl.lit(other), matched=pl.Series(base["matched"].to_numpy() ^ flips))])
    write_rows(store, dataset, run_id, decisions, judge=judge, failed=failed, created=created)


def write_rows(store: Store, dataset, run_id: str, decisions: pl.DataFrame, *, judge: str = "judge-x",
               failed: frozenset[str] = frozenset(), created: int = 0) -> None:
    """The runs, answers and judgments rows around ``decisions`` (cases in ``failed`` get an error answer)."""
    store.write_dataset(dataset)
    attempted = set(decisions["case_id"].to_list()) | set(failed)
    case_ids = [c for c in dataset.cases["case_id"].to_list() if c in attempted]
    store.write("runs", run_id, [{
        "run_id": run_id, "answer_model": f"model-{run_id}", "judge_model": judge,
        "protocol_version": PROTOCOL_VERSION, "dataset_sha256": dataset.sha256, "source": "collected",
        "created_at": f"2025-01-01T00:{created // 60:02d}:{created % 60:02d}Z", "settings": None}])
    store.write("answers", run_id, [{
        "run_id": run_id, "case_id": c, "attempt": 1, "seq": i, "answer_model": f"model-{run_id}",
        "answer": None if c in failed else "simulated answer",
        "error": "APIStatusError: simulated failure" if c in failed else None} for i, c in enumerate(case_ids)])
    judges = decisions.select("case_id", "judge_model", "judge_pass").unique(maintain_order=True)
    store.write("judgments", run_id, [{
        "run_id": run_id, "case_id": row["case_id"], "judge_model": row["judge_model"],
        "judge_pass": row["judge_pass"], "attempt": 1, "answer_attempt": 1, "seq": len(case_ids) + i,
        "raw_reply": "{}", "error": None} for i, row in enumerate(judges.iter_rows(named=True))])
    store.write("decisions", run_id, decisions.to_arrow())


# -- case scores shaped like rubric grading, for the calibration simulations ------------------------------
# Ten benchmarks; a case's latent difficulty t ~ Beta(DIFFICULTY_ALPHA[b], DIFFICULTY_BETA[b]) is shared by
# every run graded on it (the correlation between models). Benchmarks 0-7 are points rubrics with
# RUBRIC_ITEMS[b] positive items and one harmful item (coarse scores, point masses at 0 and 1); 8-9 are
# F1-like (near-continuous, 4 digits, 15% exact zeros).
SIM_BENCHMARKS = 10
DIFFICULTY_ALPHA = np.linspace(0.6, 3.0, SIM_BENCHMARKS)
DIFFICULTY_BETA = np.linspace(2.0, 0.6, SIM_BENCHMARKS)
RUBRIC_ITEMS = (1, 2, 3, 4, 5, 6, 8, 10)
HARM_RATE = 0.3  # the harmful item is endorsed with probability HARM_RATE (1 - t)
F1_ZEROS = 0.15


def difficulties(rng: np.random.Generator, replicates: int, cases: int) -> np.ndarray:
    """(replicates, SIM_BENCHMARKS, cases) case difficulties."""
    return rng.beta(DIFFICULTY_ALPHA[None, :, None], DIFFICULTY_BETA[None, :, None],
                    size=(replicates, SIM_BENCHMARKS, cases))


def rubric_scores(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """One run's case scores for difficulties t of shape (replicates, SIM_BENCHMARKS, cases)."""
    out = np.empty_like(t)
    for b in range(SIM_BENCHMARKS):
        tb = t[:, b]
        if b < len(RUBRIC_ITEMS):
            positive = rng.binomial(RUBRIC_ITEMS[b], tb)
            negative = rng.binomial(1, HARM_RATE * (1 - tb))  # endorsed more by weak answers
            out[:, b] = np.clip((positive - negative) / RUBRIC_ITEMS[b], 0.0, 1.0)
        else:
            f1 = rng.beta(6 * tb + 0.05, 6 * (1 - tb) + 0.05).round(4)
            f1[rng.random(f1.shape) < F1_ZEROS] = 0.0
            out[:, b] = f1
    return out


def expected_scores(skill: float = 1.0) -> np.ndarray:
    """(SIM_BENCHMARKS,) exact mean case score of ``rubric_scores(rng, skill * t)``.

    Given t the mean is a polynomial in t (degree <= items + 1), so Gauss-Jacobi quadrature against the
    Beta density is exact; the F1 benchmarks' 4-digit rounding (a bias below 5e-5) is left out."""
    from math import comb

    from scipy.special import roots_jacobi

    out = np.empty(SIM_BENCHMARKS)
    for b in range(SIM_BENCHMARKS):
        x, w = roots_jacobi(40, DIFFICULTY_BETA[b] - 1, DIFFICULTY_ALPHA[b] - 1)
        t = skill * (1 + x) / 2
        if b < len(RUBRIC_ITEMS):
            n, harm = RUBRIC_ITEMS[b], HARM_RATE * (1 - t)
            given = sum(comb(n, k) * t ** k * (1 - t) ** (n - k)
                        * ((1 - harm) * min(k / n, 1.0) + harm * max(k - 1, 0) / n) for k in range(n + 1))
        else:
            given = (1 - F1_ZEROS) * (6 * t + 0.05) / 6.1
        out[b] = (w * given).sum() / w.sum()
    return out
