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
whole within their benchmark, every answer and pass of a drawn case with it. Resampling answers within a case
and passes within an answer as well would count the within-case spread twice (it is already inside the spread
of case scores; Davison & Hinkley 1997, section 3.8): that interval is too wide. Every estimate is a smooth
function of case means of per-case values (case mean, its square, the two within-case variances), so a
resample is a product of those values with the draw counts. Components: bootstrap-t, [est - t_hi * se,
est - t_lo * se] with t = (est* - est) / se* over resamples and se the delta-method standard error from the
covariance of the per-case values (in the sample and in each resample): percentile and BCa intervals of a
variance under-cover (91-93% at 50 cases) because a resample under-states its spread. Means (the run mean,
worst-at-k, pass^k): BCa (bias-corrected, accelerated by the case jackknife). No interval below 25 cases in a
benchmark for components and below 10 for means (tests/test_variance_coverage.py measures why).

Two intervals of the run mean, because two questions are asked of it:

* ``cases``: a new draw of cases, answers and judge passes: the BCa interval of the resampled macro mean.
  It already includes answer and judge variance: each case score averages its K answers and their
  spread is inside the spread of case scores (the identity above). It is the interval for the model's mean
  on cases like these.
* ``same_cases``: the mean these same cases would have over endless answers and judge passes (a second
  run's own mean differs from this one's by about sqrt(2) times this interval's standard error):
  mean +- z * sqrt((1/B^2) sum_b mean_c var_a(y_ca) / (K n_b)), normal; needs K >= 2.

Reliability at k, per case from its K answer scores y_(1) <= ... <= y_(K) (each the mean of its passes):
worst-at-k = sum_i C(K - i, k - 1) / C(K, k) * y_(i), the expected minimum over all k-subsets of the K answers
(unbiased; worst_at_k[1] is the case score); pass^k = C(c, k) / C(K, k) with c answers scoring at least the
threshold, the unbiased chance that k answers all pass. Both averaged per benchmark, then macro, with
case-resampled BCa intervals. Threshold default 1.0 for both kinds of benchmark: a perfect points score
(every positive item met, no negative one), and for F1 benchmarks a perfect weighted F1 - any lower cut-off is
a clinical judgement the protocol does not make, so it is the user's to set (``f1_threshold``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit.analysis._variance_stats import (FIXED_ROWS, MEAN, WITHIN_ANSWERS, Statistics, between_variance,
                                              case_values, components, estimates)
from toolkit.analysis.paired import ResampleSettings, draw_resamples
from toolkit.protocol import BENCHMARK_METHODS, F1_WEIGHTED_RUBRIC
from toolkit.selection import JudgeSelection, pass_level_scores, read_runs

Z95 = 1.959963984540054
OVERALL = "overall"
FRAME_COLUMNS = ("run_id", "benchmark", "case_id", "sample", "judge_pass", "score")
# Fewest cases in every benchmark of a scope for its intervals: below, an interval would not cover as it says
# (coverage measured in tests/test_variance_coverage.py), so none is given, with the reason.
MIN_INTERVAL_CASES = 10  # means: the run mean, worst-at-k
MIN_PASS_K_CASES = 25  # pass^k: a share of rare all-pass cases under-covers below (79-90 % at 10 cases)
MIN_COMPONENT_CASES = 25  # variance components


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
    worst_at_k: pl.DataFrame  # run_id, benchmark, k, value, ci_low, ci_high, ci_note
    pass_k: pl.DataFrame  # run_id, benchmark, k, threshold, value, ci_low, ci_high, ci_note
    design: pl.DataFrame  # run_id, benchmark, n_cases, answers_per_case, passes_per_answer
    notes: list[str]

    def sections(self) -> dict[str, pl.DataFrame]:
        """The output's sections: components (without shares), shares (each estimated part's fraction of the
        variance of the run mean), the run intervals, worst-at-k and pass^k."""
        shares = self.components.filter(pl.col("share").is_not_null()).select("run_id", "benchmark", "component",
                                                                              "share")
        return {"design": self.design, "components": self.components.drop("share"), "shares": shares,
                "intervals": self.intervals, "worst_at_k": self.worst_at_k, "pass_k": self.pass_k}

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


def variance_components(store, run_ids: list[str], options: VarianceOptions = VarianceOptions()) -> VarianceBudget:
    """The variance budget of these stored runs (their scored judge and passes: ``options.selection``)."""
    data = read_runs(store, run_ids, texts=False)
    frame = pass_level_scores(data, options.selection)
    order = {r: i for i, r in enumerate(data.runs["run_id"].to_list())}
    scored = set(frame["run_id"].unique().to_list())
    if not scored:
        raise ValueError("variance: no selected run has a scored answer under this judge selection")
    budget = variance_budget(frame.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64),
                                        maintain_order=True), options)
    budget.notes.extend(f"run {run} has no scored answer under this judge selection: left out"
                        for run in order if run not in scored)
    return budget


def _designs(frame: pl.DataFrame) -> dict[str, tuple[int, int]]:
    """Run -> (K, J), or ValueError naming the first case that breaks its run's balance."""
    per_answer = frame.group_by("run_id", "case_id", "sample").agg(pl.len().alias("passes"))
    per_case = per_answer.group_by("run_id", "case_id").agg(
        pl.len().alias("answers"), pl.col("passes").min().alias("lo"), pl.col("passes").max().alias("hi"))
    usual = per_case.group_by("run_id").agg(pl.col("answers").mode().max().alias("K")).join(
        per_answer.group_by("run_id").agg(pl.col("passes").mode().max().alias("J")), on="run_id")
    odd = per_case.join(usual, on="run_id").filter(
        (pl.col("answers") != pl.col("K")) | (pl.col("lo") != pl.col("J")) | (pl.col("hi") != pl.col("J")))
    if odd.height:
        case = odd.sort("run_id", "case_id").row(0, named=True)
        raise ValueError(f"variance: run {case['run_id']} is unbalanced: case {case['case_id']} has {case['answers']} "
                         f"answer sample(s) with {case['lo']}-{case['hi']} judge pass(es), most cases {case['K']} with "
                         f"{case['J']} (complete the run, or choose passes with --pass)")
    return {run: (int(k), int(j)) for run, k, j in usual.iter_rows()}


def _check(frame: pl.DataFrame) -> None:
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"variance: the score frame lacks column(s) {', '.join(missing)}")
    if frame.is_empty():
        raise ValueError("variance: no scored answer in the selected runs")
    scores = frame["score"].cast(pl.Float64)
    if scores.null_count() or not scores.is_finite().all():
        raise ValueError("variance: a score is missing or not finite")
    if frame.select(FRAME_COLUMNS[:5]).is_duplicated().any():
        raise ValueError("variance: a run x case x sample x pass appears twice in the score frame")


def variance_budget(frame: pl.DataFrame, options: VarianceOptions = VarianceOptions()) -> VarianceBudget:
    """The budget of every run in ``frame`` (FRAME_COLUMNS; runs in their first-row order)."""
    _check(frame)
    designs = _designs(frame)
    order = {run: i for i, run in enumerate(frame["run_id"].unique(maintain_order=True).to_list())}
    frame = frame.with_columns(_run=pl.col("run_id").replace_strict(order, return_dtype=pl.Int64)).sort(
        "_run", "benchmark", "case_id", "sample", "judge_pass")
    parts: dict[str, list] = {name: [] for name in SCHEMAS}
    notes: list[str] = []
    runs, names = frame["run_id"].to_numpy(), frame["benchmark"].to_numpy()
    scores = frame["score"].cast(pl.Float64).to_numpy()
    starts = np.flatnonzero(np.r_[True, (runs[1:] != runs[:-1]) | (names[1:] != names[:-1])])
    blocks: dict[str, list[tuple[str, np.ndarray]]] = {}
    for start, stop in zip(starts, np.r_[starts[1:], len(scores)]):
        blocks.setdefault(runs[start], []).append((names[start], scores[start:stop]))
    for run, benchmarks in blocks.items():
        _run_budget(run, benchmarks, designs[run], options, parts, notes)
    frames = {name: pl.DataFrame(rows, schema=SCHEMAS[name], orient="row") for name, rows in parts.items()}
    return VarianceBudget(frames["components"], frames["intervals"], frames["worst_at_k"], frames["pass_k"],
                          frames["design"], list(dict.fromkeys(notes)))


SCHEMAS = {
    "components": {"run_id": pl.String, "benchmark": pl.String, "component": pl.String, "variance": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64, "share": pl.Float64, "ci_note": pl.String},
    "intervals": {"run_id": pl.String, "benchmark": pl.String, "kind": pl.String, "mean": pl.Float64,
                  "ci_low": pl.Float64, "ci_high": pl.Float64, "note": pl.String},
    "worst_at_k": {"run_id": pl.String, "benchmark": pl.String, "k": pl.Int64, "value": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.String},
    "pass_k": {"run_id": pl.String, "benchmark": pl.String, "k": pl.Int64, "threshold": pl.Float64,
               "value": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.String},
    "design": {"run_id": pl.String, "benchmark": pl.String, "n_cases": pl.Int64, "answers_per_case": pl.Int64,
               "passes_per_answer": pl.Int64},
}


FEW_NOTE = f"fewer than {MIN_INTERVAL_CASES} cases in a benchmark: no interval"
FEW_PASS_NOTE = (f"fewer than {MIN_PASS_K_CASES} cases in a benchmark: no interval (a pass^k interval "
                 "under-covers there)")
# A statistic equal in every resample (pass^k of cases that never pass, identical scores) has a zero-width
# interval, which would claim a certainty the cases cannot give: none is shown (as compare does).
FLAT_NOTE = "no variation between cases: no interval"


def _ends(low, high, note: str | None) -> tuple[float | None, float | None, str | None]:
    """(ci_low, ci_high, ci_note) of an interval; a zero-width one is none, with FLAT_NOTE."""
    low, high = _num(low), _num(high)
    if low is not None and high is not None and low == high:
        return None, None, FLAT_NOTE
    return low, high, note


def _threshold(benchmark: str, options: VarianceOptions) -> float:
    method = BENCHMARK_METHODS.get(benchmark)
    return options.f1_threshold if method == F1_WEIGHTED_RUBRIC else options.points_threshold


def _num(value: float | np.floating | None) -> float | None:
    return None if value is None or math.isnan(float(value)) else float(value)


def _run_budget(run: str, benchmarks: list[tuple[str, np.ndarray]], design: tuple[int, int],
                options: VarianceOptions, parts: dict[str, list], notes: list[str]) -> None:
    """The rows of one run; ``benchmarks``: (name, its scores ordered by case, sample and pass), by name."""
    answers, passes = design
    names, values, thresholds = [], [], []
    for name, scores in benchmarks:
        names.append(name)
        thresholds.append(_threshold(name, options))
        values.append(case_values(scores.reshape(-1, answers, passes), thresholds[-1]))
    draws = draw_resamples(list(zip(names, [v.shape[1] for v in values])), options.resamples)
    stats = Statistics(values, draws.counts)
    sizes = stats.sizes
    pending = []  # (table, row without interval, statistic index, why no interval or None)
    components_rows: list[tuple] = []
    scopes = [(name, [b]) for b, name in enumerate(names)] + [(OVERALL, list(range(len(names))))]
    for scope, members in scopes:
        parts["design"].append((run, scope, sum(sizes[b] for b in members), answers, passes))
        components_rows += _components(run, scope, members, stats, answers, passes, notes)
        for k in range(1, answers + 1):
            same = len({thresholds[b] for b in members}) == 1
            worst = stats.add(lambda means, n, row=FIXED_ROWS + k - 1: means[row], members)
            share = stats.add(lambda means, n, row=FIXED_ROWS + answers + k - 1: means[row], members)
            smallest = min(sizes[b] for b in members)
            pending.append(("worst_at_k", (run, scope, k), worst, FEW_NOTE if smallest < MIN_INTERVAL_CASES else None))
            pending.append(("pass_k", (run, scope, k, thresholds[members[0]] if same else None), share,
                            FEW_PASS_NOTE if smallest < MIN_PASS_K_CASES else None))
    mean = stats.add(lambda means, n: means[MEAN], list(range(len(names))))
    point, low, high = stats.intervals()
    lows, highs = stats.component_intervals()
    for head, (share, note), index in components_rows:
        ends = (None, None, note) if index is None else _ends(lows[index], highs[index], note)
        parts["components"].append((*head, *ends[:2], share, ends[2]))
    for table, row, index, why in pending:
        ends = (None, None, why) if why else _ends(low[index], high[index], None)
        parts[table].append((*row, _num(point[index]), *ends))
    _run_intervals(run, sizes, stats.point, answers, (point[mean], low[mean], high[mean]), parts, notes)
    if answers == 1:
        notes.append(f"run {run} has one answer per case (K = 1): the answer component cannot be estimated "
                     "(null); the case and answer parts are shown together")
    if passes == 1:
        notes.append(f"run {run} has one judge pass per answer (J = 1): the judge component cannot be estimated "
                     "(null); it is shown inside " + ("answer+judge" if answers > 1 else "case+answer+judge"))


def _components(run: str, scope: str, members: list[int], stats: Statistics, answers: int, passes: int,
                notes: list[str]) -> list[tuple]:
    """Rows of ``scope`` (one benchmark, or the macro over ``members``): each component and its share of the
    variance of the mean, with the index of its interval (None: none); the parts the design cannot estimate
    as null with the reason. A row is ((run, scope, component, variance), (share, ci_note), index)."""
    sizes, count = stats.sizes, len(members)
    est = [estimates(stats.point[b], sizes[b], answers, passes) for b in members]
    total = sum(float(between_variance(stats.point[b], sizes[b])[0]) / sizes[b] for b in members) / count ** 2
    few = min(sizes[b] for b in members) < MIN_COMPONENT_CASES
    if few:
        notes.append(f"variance component intervals need {MIN_COMPONENT_CASES} or more cases in every benchmark "
                     "(fewer: they under-cover; none given, see ci_note)")
    elif min(sizes[b] for b in members) < 2 * MIN_COMPONENT_CASES:
        notes.append(f"variance component intervals under-cover somewhat below {2 * MIN_COMPONENT_CASES} cases per "
                     "benchmark (the case component's about 91% at 25 cases of rubric-shaped scores)")
    rows = []
    for name in components(answers, passes):
        value = sum(float(e[name][0][0]) for e in est) / count
        divisor = est[0][name][1]
        part = sum(float(e[name][0][0]) / (divisor * sizes[b]) for e, b in zip(est, members)) / count ** 2
        share = part / total if total > 0 else math.nan
        index = None if few else stats.component(name, members, answers, passes)
        note = f"fewer than {MIN_COMPONENT_CASES} cases in a benchmark: no interval" if few else None
        rows.append(((run, scope, name, _num(value)), (_num(share), note), index))
    rows += [((run, scope, name, None), (None, reason), None) for name, reason in _not_estimable(answers, passes)]
    return sorted(rows, key=lambda row: ORDER.index(row[0][2]))


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


def _run_intervals(run: str, sizes: list[int], point: list[np.ndarray], answers: int,
                   cases: tuple[float, float, float], parts: dict[str, list], notes: list[str]) -> None:
    count = len(sizes)
    mean, low, high = cases
    if min(sizes) < MIN_INTERVAL_CASES:
        for kind in ("cases", "same_cases"):
            parts["intervals"].append((run, OVERALL, kind, float(mean), None, None, FEW_NOTE))
        return
    parts["intervals"].append((run, OVERALL, "cases", float(mean), *_ends(
        low, high, "new cases, answers and judge passes: cases resampled whole (answer and judge variance are "
        "inside the spread of case scores)")))
    if answers > 1:
        within = sum(float(p[WITHIN_ANSWERS, 0]) / (answers * n) for p, n in zip(point, sizes)) / count ** 2
        half = Z95 * math.sqrt(max(within, 0.0))
        parts["intervals"].append((run, OVERALL, "same_cases", float(mean), mean - half, mean + half,
                                   "the mean of these same cases over new answers and judge passes (a second "
                                   "run's mean differs from this one's by about 1.4 times this interval's "
                                   "standard error)"))
    else:
        parts["intervals"].append((run, OVERALL, "same_cases", float(mean), None, None,
                                   "K = 1: how far new answers move the mean cannot be estimated"))
    if min(sizes) < 25:
        notes.append(f"run {run}: {min(sizes)} cases in its smallest benchmark; intervals of means under-cover "
                     "somewhat below ~25 cases per benchmark")
