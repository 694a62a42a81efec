"""The variance budget of a run: how much of the spread of its mean comes from cases, answers and judge passes,
and how reliably its answers score (worst-at-k, pass^k).

Input: one row per run x case x answer sample x judge pass of the scored judge (columns run_id, benchmark,
case_id, sample, judge_pass, score). Per run and benchmark the design must be balanced: every case K answer
samples, every answer J passes; otherwise the run is refused with one line naming a case.

Model and estimators (balanced nested ANOVA, method of moments). Score s_cap of pass p of answer a of case c:

    s_cap = mu + u_c + v_ca + e_cap,   Var u = var_case, Var v = var_answer, Var e = var_judge.

With y_ca the mean of an answer's J passes and S_c the mean of its K answers (the case score):

    var_judge  = mean_c mean_a var_p(s_cap)                    (ddof 1; needs J >= 2)
    var_answer = mean_c var_a(y_ca) - var_judge / J             (ddof 1; needs K >= 2)
    var_case   = var_c(S_c) - mean_c var_a(y_ca) / K            (ddof 1)

each unbiased; a small true component can come out below 0 and is shown as it is. A design that cannot tell
two parts apart shows their sum under a joint name (K = 1: "case+answer", J = 1: "answer+judge"), never a
number under a single part's name. The variance of the benchmark mean over n cases is, exactly for these
estimators,

    Var(mean_b) = var_c(S_c) / n = [var_case + var_answer / K + var_judge / (K J)] / n,

and of the run's macro mean (1/B) sum_b mean_b: (1/B^2) sum_b Var(mean_b). ``shares`` are each part's
fraction of it. Overall components are the benchmarks' components averaged (macro, like the protocol's means).

Intervals (seeded: ``ResampleSettings``). Cases are the independent units, so the bootstrap resamples cases
whole within their benchmark, every answer and pass of a drawn case with it; each resample's variance of
case means is scaled by n / (n - 1) to undo the resample's own plug-in shrink. Resampling answers within a
case and passes within an answer as well would count the within-case spread twice (it is already in the
spread of case scores; Davison & Hinkley 1997, section 3.8): that interval is too wide.

Two intervals of the run mean, because two questions are asked of it:

* ``cases``: a new draw of cases, answers and judge passes: the percentile interval of the resampled macro
  mean. It already includes answer and judge variance: each case score averages its K answers and their
  spread is inside the spread of case scores (the identity above). It is the interval for the model's mean
  on cases like these.
* ``same_cases``: the same cases, new answers and judge passes (how far a re-run moves the number):
  mean +- z * sqrt((1/B^2) sum_b mean_c var_a(y_ca) / (K n_b)), normal; needs K >= 2.

Reliability at k, per case from its K answer scores y_(1) <= ... <= y_(K) (each the mean of its passes):
worst-at-k = sum_i C(K - i, k - 1) / C(K, k) * y_(i), the expected minimum over all k-subsets of the K answers
(unbiased; worst_at_k[1] is the case score); pass^k = C(c, k) / C(K, k) with c answers scoring at least the
threshold, the unbiased chance that k answers all pass. Both averaged per benchmark, then macro, with
case-resampled percentile intervals. Threshold default 1.0 for both kinds of benchmark: a perfect points score
(every positive item met, no negative one), and for F1 benchmarks a perfect weighted F1 - any lower cut-off is
a clinical judgement the protocol does not make, so it is the user's to set (``f1_threshold``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit.analysis._variance_stats import (FIXED_ROWS, WITHIN_ANSWERS, between_variance, case_values,
                                              components, estimates)
from toolkit.analysis.paired import ResampleSettings, draw_resamples, percentile_interval
from toolkit.protocol import BENCHMARK_METHODS, F1_WEIGHTED_RUBRIC
from toolkit.selection import JudgeSelection, RunData, read_runs, scored_passes, select_judgments

Z95 = 1.959963984540054
OVERALL = "overall"
FRAME_COLUMNS = ("run_id", "benchmark", "case_id", "sample", "judge_pass", "score")
MIN_INTERVAL_CASES = 10  # fewer cases in a benchmark: its (and the overall) component intervals are not given


@dataclass(frozen=True, kw_only=True)
class VarianceOptions:
    resamples: ResampleSettings = field(default_factory=ResampleSettings)
    points_threshold: float = 1.0  # pass^k: an answer passes a points benchmark at this score or above
    f1_threshold: float = 1.0  # ... and an F1 benchmark
    selection: JudgeSelection = field(default_factory=JudgeSelection)  # the scored judge and passes (store input)


@dataclass(frozen=True, eq=False)
class VarianceBudget:
    components: pl.DataFrame  # run_id, benchmark, component, variance, ci_low, ci_high, share, ci_note
    intervals: pl.DataFrame  # run_id, benchmark (overall), kind (cases | same_cases), mean, ci_low, ci_high, note
    worst_at_k: pl.DataFrame  # run_id, benchmark, k, value, ci_low, ci_high
    pass_k: pl.DataFrame  # run_id, benchmark, k, threshold, value, ci_low, ci_high
    design: pl.DataFrame  # run_id, benchmark, n_cases, answers_per_case, passes_per_answer
    notes: list[str]

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"design": self.design, "components": self.components, "intervals": self.intervals,
                "worst_at_k": self.worst_at_k, "pass_k": self.pass_k}

    def records(self) -> list[dict]:
        """Per run and benchmark (and overall): benchmark, n_cases, answers_per_case, passes_per_answer,
        var_case, var_answer, var_judge (None where the design cannot separate them) and their intervals."""
        out = []
        for row in self.design.iter_rows(named=True):
            parts = self.components.filter((pl.col("run_id") == row["run_id"]) & (pl.col("benchmark") == row["benchmark"]))
            record = dict(row)
            for name in ("case", "answer", "judge"):
                hit = parts.filter(pl.col("component") == name)
                value = hit.row(0, named=True) if hit.height else {}
                record[f"var_{name}"] = value.get("variance")
                record[f"var_{name}_ci"] = [value.get("ci_low"), value.get("ci_high")] if value else None
            out.append(record)
        return out


def answer_scores(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x case x sample x pass of the selected judge (FRAME_COLUMNS). Stores without answer
    samples hold one answer per case: sample 0."""
    _, decisions = select_judgments(data, selection)
    passes = scored_passes(data, decisions)
    sample = pl.col("sample") if "sample" in passes.columns else pl.lit(0, dtype=pl.Int32).alias("sample")
    return passes.select("run_id", "benchmark", "case_id", sample, "judge_pass", "score")


def variance_components(store, run_ids: list[str], options: VarianceOptions = VarianceOptions()) -> VarianceBudget:
    """The variance budget of these stored runs (their scored judge and passes: ``options.selection``)."""
    data = read_runs(store, run_ids, texts=False)
    frame = answer_scores(data, options.selection)
    order = {r: i for i, r in enumerate(data.runs["run_id"].to_list())}
    return variance_budget(frame.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64),
                                      maintain_order=True), options)


def _design(run: str, rows: pl.DataFrame) -> tuple[int, int]:
    """(K, J) of one run's rows, or ValueError naming the first case that breaks the balance."""
    per_answer = rows.group_by("case_id", "sample").agg(pl.len().alias("passes"))
    per_case = per_answer.group_by("case_id").agg(pl.len().alias("answers"), pl.col("passes").min().alias("lo"),
                                                  pl.col("passes").max().alias("hi")).sort("case_id")
    answers, passes = per_case["answers"].mode().sort()[-1], per_answer["passes"].mode().sort()[-1]
    odd = per_case.filter((pl.col("answers") != answers) | (pl.col("lo") != passes) | (pl.col("hi") != passes))
    if odd.height:
        case = odd.row(0, named=True)
        raise ValueError(f"variance: run {run} is unbalanced: case {case['case_id']} has {case['answers']} answer "
                         f"sample(s) with {case['lo']}-{case['hi']} judge pass(es), most cases {answers} with "
                         f"{passes} (complete the run, or choose passes with --pass)")
    return int(answers), int(passes)


def _check(frame: pl.DataFrame) -> None:
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"variance: the score frame lacks column(s) {', '.join(missing)}")
    scores = frame["score"].cast(pl.Float64)
    if scores.null_count() or not scores.is_finite().all():
        raise ValueError("variance: a score is missing or not finite")
    if frame.select(FRAME_COLUMNS[:5]).is_duplicated().any():
        raise ValueError("variance: a run x case x sample x pass appears twice in the score frame")


def variance_budget(frame: pl.DataFrame, options: VarianceOptions = VarianceOptions()) -> VarianceBudget:
    """The budget of every run in ``frame`` (FRAME_COLUMNS; runs in their first-row order)."""
    _check(frame)
    if frame.is_empty():
        raise ValueError("variance: no scored answer in the selected runs")
    parts: dict[str, list[dict]] = {"components": [], "intervals": [], "worst_at_k": [], "pass_k": [], "design": []}
    notes: list[str] = []
    for run in frame["run_id"].unique(maintain_order=True).to_list():
        _run_budget(run, frame.filter(pl.col("run_id") == run), options, parts, notes)
    frames = {name: pl.DataFrame(rows, schema=SCHEMAS[name], orient="row") for name, rows in parts.items()}
    return VarianceBudget(frames["components"], frames["intervals"], frames["worst_at_k"], frames["pass_k"],
                          frames["design"], list(dict.fromkeys(notes)))


SCHEMAS = {
    "components": {"run_id": pl.String, "benchmark": pl.String, "component": pl.String, "variance": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64, "share": pl.Float64, "ci_note": pl.String},
    "intervals": {"run_id": pl.String, "benchmark": pl.String, "kind": pl.String, "mean": pl.Float64,
                  "ci_low": pl.Float64, "ci_high": pl.Float64, "note": pl.String},
    "worst_at_k": {"run_id": pl.String, "benchmark": pl.String, "k": pl.Int64, "value": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64},
    "pass_k": {"run_id": pl.String, "benchmark": pl.String, "k": pl.Int64, "threshold": pl.Float64,
               "value": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64},
    "design": {"run_id": pl.String, "benchmark": pl.String, "n_cases": pl.Int64, "answers_per_case": pl.Int64,
               "passes_per_answer": pl.Int64},
}


def _threshold(benchmark: str, options: VarianceOptions) -> float:
    method = BENCHMARK_METHODS.get(benchmark)
    return options.f1_threshold if method == F1_WEIGHTED_RUBRIC else options.points_threshold


def _num(value: float | np.floating) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _run_budget(run: str, rows: pl.DataFrame, options: VarianceOptions, parts: dict[str, list], notes: list[str]
                ) -> None:
    answers, passes = _design(run, rows)
    rows = rows.sort("benchmark", "case_id", "sample", "judge_pass")
    names = rows["benchmark"].unique(maintain_order=True).to_list()
    values, thresholds = [], []
    for name in names:
        scores = rows.filter(pl.col("benchmark") == name)["score"].cast(pl.Float64).to_numpy()
        thresholds.append(_threshold(name, options))
        values.append(case_values(scores.reshape(-1, answers, passes), thresholds[-1]))
    sizes = [v.shape[1] for v in values]
    draws = draw_resamples(list(zip(names, sizes)), options.resamples)
    point = [v.mean(axis=1)[:, None] for v in values]  # (rows, 1) case means
    boot = [(v @ draws.counts[b]) / v.shape[1] for b, v in enumerate(values)]  # (rows, samples)
    scopes = [(name, [b]) for b, name in enumerate(names)] + [(OVERALL, list(range(len(names))))]
    for scope, members in scopes:
        n_cases = sum(sizes[b] for b in members)
        parts["design"].append((run, scope, n_cases, answers, passes))
        _components(run, scope, members, sizes, point, boot, answers, passes, parts, notes)
        _reliability(run, scope, members, point, boot, answers, thresholds, parts)
    _run_intervals(run, sizes, point, boot, answers, options, parts, notes)
    if answers == 1:
        notes.append(f"run {run} has one answer per case (K = 1): the answer component cannot be estimated "
                     "(null); the case and answer parts are shown together")
    if passes == 1:
        notes.append(f"run {run} has one judge pass per answer (J = 1): the judge component cannot be estimated "
                     "(null); it is shown inside " + ("answer+judge" if answers > 1 else "case+answer+judge"))


def _components(run: str, scope: str, members: list[int], sizes: list[int], point: list[np.ndarray],
                boot: list[np.ndarray], answers: int, passes: int, parts: dict[str, list], notes: list[str]) -> None:
    """Rows of ``scope`` (one benchmark, or the macro over ``members``): each component, its interval, share."""
    count = len(members)
    est = [estimates(point[b], sizes[b], answers, passes) for b in members]
    res = [estimates(boot[b], sizes[b], answers, passes, resampled=True) for b in members]
    total = sum(float(between_variance(point[b], sizes[b])[0]) / sizes[b] for b in members) / count ** 2
    few = min(sizes[b] for b in members) < MIN_INTERVAL_CASES
    if few:
        notes.append(f"component intervals need {MIN_INTERVAL_CASES} or more cases in every benchmark: a variance "
                     "from fewer cases has no usable bootstrap interval (ci_note)")
    rows = []
    for name in components(answers, passes):
        value = sum(float(e[name][0][0]) for e in est) / count
        divisor = est[0][name][1]
        share_of = sum(float(e[name][0][0]) / (divisor * sizes[b]) for e, b in zip(est, members)) / count ** 2
        low = high = math.nan
        note = None
        if few:
            note = f"fewer than {MIN_INTERVAL_CASES} cases in a benchmark: no interval"
        else:
            low, high = percentile_interval(sum(r[name][0] for r in res) / count)
        share = share_of / total if total > 0 else math.nan
        rows.append((run, scope, name, _num(value), _num(low), _num(high), _num(share), note))
    rows += [(run, scope, name, None, None, None, None, reason) for name, reason in _not_estimable(answers, passes)]
    parts["components"] += sorted(rows, key=lambda row: ORDER.index(row[2]))


ORDER = ("case", "answer", "judge", "case+answer", "answer+judge", "case+answer+judge")


def _not_estimable(answers: int, passes: int) -> list[tuple[str, str]]:
    """The single components a design cannot estimate, each with why (null in the output, never 0)."""
    out = []
    if answers == 1:
        out += [("case", "K = 1: not separable from answer variance"),
                ("answer", "K = 1: one answer per case, answer variance cannot be estimated")]
    if passes == 1:
        out.append(("judge", "J = 1: one judge pass per answer, judge variance cannot be estimated"))
        if answers > 1:
            out.append(("answer", "J = 1: not separable from judge variance"))
    return out


def _reliability(run: str, scope: str, members: list[int], point: list[np.ndarray], boot: list[np.ndarray],
                 answers: int, thresholds: list[float], parts: dict[str, list]) -> None:
    count = len(members)
    same = len({thresholds[b] for b in members}) == 1
    for k in range(1, answers + 1):
        for key, row in (("worst_at_k", FIXED_ROWS + k - 1), ("pass_k", FIXED_ROWS + answers + k - 1)):
            value = sum(float(point[b][row, 0]) for b in members) / count
            low, high = percentile_interval(sum(boot[b][row] for b in members) / count)
            if key == "worst_at_k":
                parts[key].append((run, scope, k, value, _num(low), _num(high)))
            else:
                threshold = thresholds[members[0]] if same else None
                parts[key].append((run, scope, k, threshold, value, _num(low), _num(high)))


def _run_intervals(run: str, sizes: list[int], point: list[np.ndarray], boot: list[np.ndarray], answers: int,
                   options: VarianceOptions, parts: dict[str, list], notes: list[str]) -> None:
    count = len(sizes)
    mean = sum(float(p[0, 0]) for p in point) / count
    low, high = percentile_interval(sum(b[0] for b in boot) / count)
    parts["intervals"].append((run, OVERALL, "cases", mean, _num(low), _num(high),
                               "new cases, answers and judge passes: cases resampled whole (answer and judge "
                               "variance are inside the spread of case scores)"))
    if answers > 1:
        within = sum(float(p[WITHIN_ANSWERS, 0]) / (answers * n) for p, n in zip(point, sizes)) / count ** 2
        half = Z95 * math.sqrt(max(within, 0.0))
        parts["intervals"].append((run, OVERALL, "same_cases", mean, mean - half, mean + half,
                                   "the same cases, new answers and judge passes: how far a re-run moves the mean"))
    else:
        parts["intervals"].append((run, OVERALL, "same_cases", mean, None, None,
                                   "K = 1: how far new answers move the mean cannot be estimated"))
    if min(sizes) < 25:
        notes.append(f"run {run}: {min(sizes)} cases in its smallest benchmark; case-resampled percentile "
                     "intervals under-cover below ~25 cases per benchmark")
