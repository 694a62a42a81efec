"""A simulated physician and a biased judge on rubric cases, for the judge-vs-physician tests.

Each replicate draws its own cases (one replicate = one run id, so ``toolkit.scoring.pass_scores`` scores
every replicate in one call). A case has a difficulty t ~ Beta(2, 2); the physician's truth is met with
probability t on a positive or zero item and 0.3 (1 - t) on a negative one; the judge misses a met
positive item with probability FN and endorses an unmet negative item with probability FP (and errs at
a small background rate elsewhere). Points-rubric and F1-rubric benchmarks alternate.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl

from toolkit import protocol
from toolkit.scoring import pass_scores

POINTS_ITEMS = (3, 2, 2, 1, -1, -2)
F1_ITEMS = (3, 2, 1, 0, -1, -2, -3)
FP_NEGATIVE, FN_POSITIVE, BACKGROUND = 0.25, 0.10, 0.03


def rubric(benchmarks: int, cases: int) -> pl.DataFrame:
    """rubric_items rows: ``cases`` cases per benchmark; benchmark b is F1-graded when b is odd."""
    rows = []
    for b in range(benchmarks):
        method = protocol.F1_WEIGHTED_RUBRIC if b % 2 else protocol.POINTS_RUBRIC
        name = f"f1_{b}" if b % 2 else f"points_{b}"
        points = F1_ITEMS if b % 2 else POINTS_ITEMS
        for c in range(cases):
            for i, p in enumerate(points):
                klass = protocol.POINTS_TO_CLASS[p] if b % 2 else None
                rows.append({"case_id": f"b{b}c{c}", "item_id": f"b{b}c{c}_{i}", "item_index": i, "benchmark": name,
                             "grading_method": method, "points": float(p), "severity_class": klass,
                             "weight": float(protocol.CLASS_WEIGHT[klass]) if klass else None})
    return pl.DataFrame(rows, schema={"case_id": pl.String, "item_id": pl.String, "item_index": pl.Int32,
                                      "benchmark": pl.String, "grading_method": pl.String, "points": pl.Float64,
                                      "severity_class": pl.Int32, "weight": pl.Float64})


def draw(rng: np.random.Generator, items: pl.DataFrame, replicates: int, difficulty: tuple[float, float] = (2.0, 2.0)
         ) -> tuple[np.ndarray, np.ndarray]:
    """(physician, judge) decisions, (replicates, items) booleans; t ~ Beta(*difficulty)."""
    case_index = items["case_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    t = rng.beta(*difficulty, size=(replicates, case_index.max() + 1))[:, case_index]
    points = items["points"].to_numpy()[None, :]
    truth = rng.random(t.shape) < np.where(points < 0, 0.3 * (1 - t), t)
    u = rng.random(t.shape)
    judge = np.where(truth, u >= np.where(points > 0, FN_POSITIVE, BACKGROUND),
                     u < np.where(points < 0, FP_NEGATIVE, BACKGROUND))
    return truth, judge


def case_scores(items: pl.DataFrame, matched: np.ndarray, keep: np.ndarray | None = None) -> pl.DataFrame:
    """run_id (replicate), case_id, benchmark, score of every case of every replicate (only the items
    where ``keep`` is True, whole cases of them, when given)."""
    reps, width = matched.shape
    decisions = pl.DataFrame({
        "run_id": np.repeat(np.arange(reps), width).astype(str), "case_id": np.tile(items["case_id"].to_numpy(), reps),
        "sample": np.zeros(reps * width, dtype=np.int32), "judge_model": "sim",
        "judge_pass": np.ones(reps * width, dtype=np.int32), "item_id": np.tile(items["item_id"].to_numpy(), reps),
        "matched": matched.ravel()})
    if keep is not None:
        decisions = decisions.filter(pl.Series(keep.ravel()))
    return pass_scores(decisions, items).select("run_id", "case_id", "benchmark", "score")


def labelled_order(rng: np.random.Generator, items: pl.DataFrame, replicates: int) -> np.ndarray:
    """(replicates, cases) a random order of the cases per replicate: the first n are the n labelled."""
    return rng.random((replicates, items["case_id"].n_unique())).argsort(axis=1)


class Simulated:
    """One simulation: judge scores of every case, physician scores of the first ``most`` cases of each
    replicate's random order; ``cases(n)`` is the frame ``corrected_means`` takes with n labelled cases."""

    def __init__(self, items: pl.DataFrame, replicates: int, most: int, seed: int,
                 difficulty: tuple[float, float] = (2.0, 2.0)):
        rng = np.random.default_rng(seed)
        truth, judge = draw(rng, items, replicates, difficulty)
        order = labelled_order(rng, items, replicates)[:, :most]
        case_ids = items["case_id"].unique(maintain_order=True).to_numpy()
        self.judge = case_scores(items, judge).rename({"score": "judge"})
        chosen = pl.DataFrame({"run_id": np.repeat(np.arange(replicates), most).astype(str),
                               "case_id": case_ids[order.ravel()],
                               "rank": np.tile(np.arange(most), replicates)})
        # only the labelled cases' physician scores are ever read: score those items alone
        position = {c: i for i, c in enumerate(case_ids)}
        columns = np.array([position[c] for c in items["case_id"].to_list()])
        mask = np.zeros((replicates, case_ids.size), dtype=bool)
        np.put_along_axis(mask, order, True, axis=1)
        labelled = mask[:, columns]
        phys = case_scores(items, truth, labelled).rename({"score": "physician"})
        self.labelled = chosen.join(phys, on=["run_id", "case_id"]).join(
            self.judge.select("run_id", "case_id", pl.col("judge").alias("judge_labelled")), on=["run_id", "case_id"])
        self.replicates = replicates

    def cases(self, n: int) -> pl.DataFrame:
        lab = self.labelled.filter(pl.col("rank") < n).drop("rank", "benchmark")
        return self.judge.join(lab, on=["run_id", "case_id"], how="left").with_columns(
            labels=pl.when(pl.col("physician").is_not_null()).then(pl.lit(len(POINTS_ITEMS))))

    def runs(self) -> list[str]:
        return [str(i) for i in range(self.replicates)]


def true_means(items: pl.DataFrame, seed: int = 99, replicates: int = 200,
               difficulty: tuple[float, float] = (2.0, 2.0)) -> dict[str, float]:
    """Each benchmark's mean physician case score over the case population (large Monte Carlo draw)."""
    truth, _ = draw(np.random.default_rng(seed), items, replicates, difficulty)
    return dict(case_scores(items, truth).group_by("benchmark").agg(pl.col("score").mean()).iter_rows())


def true_mean(items: pl.DataFrame, seed: int = 99, replicates: int = 200) -> float:
    """The macro mean of physician case scores over the case population (large Monte Carlo draw)."""
    return float(np.mean(list(true_means(items, seed, replicates).values())))


def _answers(rng: np.random.Generator, t: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(physician, judge) decisions of answers whose per-item difficulties are ``t``, as ``draw`` makes them."""
    truth = rng.random(t.shape) < np.where(points < 0, 0.3 * (1 - t), t)
    u = rng.random(t.shape)
    judge = np.where(truth, u >= np.where(points > 0, FN_POSITIVE, BACKGROUND),
                     u < np.where(points < 0, FP_NEGATIVE, BACKGROUND))
    return truth, judge


def draw_pair(rng: np.random.Generator, items: pl.DataFrame, replicates: int, shift: float,
              difficulty: tuple[float, float] = (2.0, 2.0)) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Two runs' answers to the same cases: ((physician, judge) of run a, of run b), (replicates, items) each.
    A case's t ~ Beta(*difficulty) is shared; run b answers it as run a would a case of t - shift (at least 0),
    so the runs' case scores are correlated through the case and b scores lower."""
    case_index = items["case_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    t = rng.beta(*difficulty, size=(replicates, case_index.max() + 1))[:, case_index]
    points = items["points"].to_numpy()[None, :]
    return _answers(rng, t, points), _answers(rng, np.maximum(t - shift, 0.0), points)


def true_differences(items: pl.DataFrame, shift: float, seed: int = 99, replicates: int = 400) -> dict[str, float]:
    """Each benchmark's mean physician case-score difference (run a - run b) over the case population."""
    (truth_a, _), (truth_b, _) = draw_pair(np.random.default_rng(seed), items, replicates, shift)
    a, b = case_scores(items, truth_a), case_scores(items, truth_b)
    return dict(a.join(b, on=["run_id", "case_id", "benchmark"]).group_by("benchmark").agg(
        (pl.col("score") - pl.col("score_right")).mean()).iter_rows())


class SimulatedPair:
    """Two runs (``{r}:a``, ``{r}:b`` of replicate r, one dataset per replicate) graded by the judge on every
    case, physician labels on both runs' answers to the same cases, drawn at random within each benchmark:
    ``cases(n)`` is the frame ``corrected_differences`` takes with n labelled cases per benchmark (at most
    ``most``), ``data`` the runs it reads the datasets from."""

    def __init__(self, items: pl.DataFrame, replicates: int, most: int, seed: int, shift: float):
        rng = np.random.default_rng(seed)
        runs = draw_pair(rng, items, replicates, shift)
        per_case = items.select("case_id", "benchmark").unique(maintain_order=True)
        bench = per_case["benchmark"].to_numpy()
        u = rng.random((replicates, per_case.height))
        rank = np.zeros(u.shape, dtype=np.int64)  # each case's place in its benchmark's random order
        for name in np.unique(bench):
            block = np.flatnonzero(bench == name)
            rank[:, block] = u[:, block].argsort(axis=1).argsort(axis=1)
        position = {c: i for i, c in enumerate(per_case["case_id"].to_list())}
        labelled = (rank < most)[:, np.array([position[c] for c in items["case_id"].to_list()])]
        ranks = pl.DataFrame({"run": np.repeat(np.arange(replicates), per_case.height).astype(str),
                              "case_id": np.tile(per_case["case_id"].to_numpy(), replicates), "rank": rank.ravel()})
        frames = []
        for side, (truth, judge) in zip("ab", runs):
            judged = case_scores(items, judge).rename({"score": "judge", "run_id": "run"})
            phys = case_scores(items, truth, labelled).rename({"score": "physician", "run_id": "run"}).drop("benchmark")
            frames.append(judged.join(ranks, on=["run", "case_id"]).join(phys, on=["run", "case_id"], how="left")
                          .with_columns(run_id=pl.col("run") + f":{side}"))
        self.frame = pl.concat(frames).sort("run", "run_id", "case_id")
        self.runs = [f"{r}:{side}" for r in range(replicates) for side in "ab"]
        self.data = SimpleNamespace(runs=pl.DataFrame({"run_id": self.runs,
                                                       "dataset_sha256": [r.split(":")[0] for r in self.runs]}))

    def cases(self, n: int) -> pl.DataFrame:
        labelled = pl.col("rank") < n
        return self.frame.select(
            "run_id", "case_id", "benchmark", "judge",
            pl.when(labelled).then(pl.col("physician")).alias("physician"),
            pl.when(labelled).then(pl.col("judge")).alias("judge_labelled"),
            pl.when(labelled).then(pl.lit(len(POINTS_ITEMS))).alias("labels"))
