"""Simulated answer-level scores (run x case x sample x pass) for the variance-budget tests: planted normal
components, and scores shaped like rubric grading (tests/analysis_sim.py) with answers that vary."""

from __future__ import annotations

import numpy as np
import polars as pl

from tests.analysis_sim import SIM_BENCHMARKS, difficulties, rubric_scores

PLANTED = {"case": 0.20, "answer": 0.15, "judge": 0.05}  # standard deviations
BENCHMARK_NAMES = ("drug_safety", "guideline_adherence", "landmark_trials", "medical_hallucination",
                   "health_equity", "clinical_calculations", "calculators_numerical", "calculators_conditional",
                   "safety_diagnostic", "safety_therapeutic")  # 8 points rubrics, then 2 F1 (as analysis_sim)


def frame(scores: np.ndarray) -> pl.DataFrame:
    """The score frame of a (replicates, benchmarks, cases, K, J) array: one run per replicate."""
    reps, benchmarks, cases, answers, passes = scores.shape
    index = np.indices(scores.shape).reshape(5, -1)
    names = np.array(BENCHMARK_NAMES[:benchmarks])
    return pl.DataFrame({
        "run_id": pl.Series(index[0]).cast(pl.String), "benchmark": names[index[1]],
        "case_id": pl.Series(index[1] * cases + index[2]).cast(pl.String),
        "sample": pl.Series(index[3], dtype=pl.Int32), "judge_pass": pl.Series(index[4] + 1, dtype=pl.Int32),
        "score": scores.ravel()})


def planted(rng: np.random.Generator, reps: int, benchmarks: int, cases: int, answers: int, passes: int,
            mean: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Scores with the PLANTED components (normal, unbounded), and each run's macro mean of its cases' true
    means (what a re-run of the same cases estimates): (reps, B, n, K, J) and (reps,)."""
    case = rng.normal(0.0, PLANTED["case"], (reps, benchmarks, cases, 1, 1))
    answer = rng.normal(0.0, PLANTED["answer"], (reps, benchmarks, cases, answers, 1))
    judge = rng.normal(0.0, PLANTED["judge"], (reps, benchmarks, cases, answers, passes))
    return mean + case + answer + judge, mean + case.mean(axis=(2, 3, 4)).mean(axis=1)


ANSWER_SPREAD = 0.15  # sd of an answer's quality around its case's difficulty


def shaped(rng: np.random.Generator, reps: int, cases: int, answers: int, passes: int) -> np.ndarray:
    """(reps, SIM_BENCHMARKS, cases, K, J) scores in [0, 1] shaped like rubric grading: an answer's quality is
    its case's latent difficulty jittered by ANSWER_SPREAD; each judge pass grades the rubric anew."""
    t = difficulties(rng, reps, cases)[..., None]
    quality = np.clip(t + rng.normal(0.0, ANSWER_SPREAD, t.shape[:-1] + (answers,)), 0.0, 1.0)
    flat = np.repeat(quality[..., None], passes, axis=-1).reshape(reps, SIM_BENCHMARKS, -1)
    return rubric_scores(rng, flat).reshape(reps, SIM_BENCHMARKS, cases, answers, passes)
