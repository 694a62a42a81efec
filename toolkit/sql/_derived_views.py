"""The four derived views, one definition each: SQL over the store's table views, and the data dictionary.

Every step mirrors a toolkit function (named in each doc) so the numbers are the toolkit's; the macros
(``bs_*``) and the placeholders (``{selection}``, ``{order}``, protocol constants, ``{sums_*}``, ``{fsum_*}``) are
filled in by ``toolkit.sql._views``. Plain data: no engine is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    name: str
    grain: str
    doc: str
    columns: tuple[tuple[str, str, str], ...]  # name, DuckDB type, meaning
    sql: str  # a SELECT over the base views, a str.format template


PASS_SCORES = View(
    "pass_scores", "run x case x judge x pass (every judge and pass a run holds)",
    "Each judge pass scored from its latest valid reply against the run's dataset rubric, exactly as "
    "`toolkit.scoring.pass_scores` (points rubric: matched signed points / available positive points, clamped "
    "to [0, 1]; F1-weighted rubric: severity-weighted precision, recall and F1, each rounded like Python's "
    "`round(x, 4)`). Decisions naming an item outside the rubric are left out here; the toolkit refuses them.",
    (
        ("run_id", "VARCHAR", "Run."), ("case_id", "VARCHAR", "Case."),
        ("judge_model", "VARCHAR", "Judge model of the pass."), ("judge_pass", "INTEGER", "Pass number, 1-based."),
        ("benchmark", "VARCHAR", "Benchmark of the case."), ("grading_method", "VARCHAR", "Grading method of the case."),
        ("score", "DOUBLE", "The pass's score in [0, 1]: clamped raw score (points) or rounded F1 (F1-weighted)."),
        ("n_decided", "INTEGER", "Rubric items the reply decided."), ("n_matched", "INTEGER", "Items judged present."),
        ("matched_signed_points", "DOUBLE", "Points rubric: sum of the matched items' signed points (else null)."),
        ("available_positive_points", "DOUBLE", "Points rubric: sum of the positive points (else null)."),
        ("raw_score", "DOUBLE", "Points rubric: the ratio before clamping (else null)."),
        ("precision", "DOUBLE", "F1-weighted: matched positive weight / matched weight, rounded (null when nothing "
                                "matched; null for the points rubric)."),
        ("recall", "DOUBLE", "F1-weighted: matched positive weight / positive weight, rounded (else null)."),
        ("f1", "DOUBLE", "F1-weighted: 2PR/(P+R) of the unrounded P and R, rounded (else null)."),
        ("severe_rate", "DOUBLE", "F1-weighted: 1.0 when a +3 item was missed or a -3 item endorsed, else 0.0."),
        ("severe_omissions", "INTEGER", "Missed items of class 9 (+3 points)."),
        ("severe_commissions", "INTEGER", "Endorsed items of class 1 (-3 points)."),
        ("matched_positive_weight", "DOUBLE", "F1-weighted: summed weight of matched positive items (else null)."),
        ("positive_weight", "DOUBLE", "F1-weighted: summed weight of positive items (else null)."),
        ("matched_weight", "DOUBLE", "F1-weighted: summed weight of matched items (else null)."),
    ),
    """WITH latest AS (
  SELECT run_id, case_id, judge_model, judge_pass, max(attempt) AS judgment_attempt
  FROM judgments WHERE error IS NULL GROUP BY run_id, case_id, judge_model, judge_pass),
d AS (
  SELECT d.run_id, d.case_id, d.judge_model, d.judge_pass, d.matched, i.item_index, i.benchmark,
         i.grading_method, i.points, i.severity_class AS k, i.weight AS w
  FROM decisions d
  JOIN latest l ON l.run_id = d.run_id AND l.case_id = d.case_id AND l.judge_model = d.judge_model
       AND l.judge_pass = d.judge_pass AND l.judgment_attempt = d.judgment_attempt
  JOIN runs r ON r.run_id = d.run_id
  JOIN rubric_items i ON i.dataset_sha256 = r.dataset_sha256 AND i.case_id = d.case_id AND i.item_id = d.item_id),
a AS (
  SELECT run_id, case_id, judge_model, judge_pass,
    first(benchmark ORDER BY item_index) AS benchmark, first(grading_method ORDER BY item_index) AS grading_method,
    count(*)::INTEGER AS n_decided, (count(*) FILTER (WHERE matched))::INTEGER AS n_matched,
    bs_seq_sum(list(CASE WHEN matched THEN points ELSE 0.0 END ORDER BY item_index)) AS msp,
    bs_seq_sum(list(greatest(points, 0.0) ORDER BY item_index)) AS app,
    bs_seq_sum(list(CASE WHEN k >= {positive} THEN w ELSE 0.0 END ORDER BY item_index)) AS pw,
    bs_seq_sum(list(CASE WHEN k >= {positive} AND matched THEN w ELSE 0.0 END ORDER BY item_index)) AS pwm,
    bs_seq_sum(list(CASE WHEN matched THEN w ELSE 0.0 END ORDER BY item_index)) AS mw,
    (count(*) FILTER (WHERE k = {omission} AND NOT matched))::INTEGER AS severe_omissions,
    (count(*) FILTER (WHERE k = {commission} AND matched))::INTEGER AS severe_commissions
  FROM d GROUP BY run_id, case_id, judge_model, judge_pass),
s AS (
  SELECT *, grading_method = {points} AS pts,
    CASE WHEN mw > 0 THEN pwm / mw END AS p_raw, CASE WHEN pw > 0 THEN pwm / pw ELSE 0.0 END AS r_raw
  FROM a),
f AS (
  SELECT *, CASE WHEN p_raw IS NOT NULL AND p_raw + r_raw > 0
    THEN 2.0::DOUBLE * p_raw * r_raw / (p_raw + r_raw) ELSE 0.0 END AS f1_raw FROM s)
SELECT run_id, case_id, judge_model, judge_pass, benchmark, grading_method,
  CASE WHEN pts THEN least(greatest(msp / app, 0.0), 1.0) ELSE bs_round4(f1_raw) END AS score,
  n_decided, n_matched,
  CASE WHEN pts THEN msp END AS matched_signed_points, CASE WHEN pts THEN app END AS available_positive_points,
  CASE WHEN pts THEN msp / app END AS raw_score,
  CASE WHEN NOT pts THEN bs_round4(p_raw) END AS precision, CASE WHEN NOT pts THEN bs_round4(r_raw) END AS recall,
  CASE WHEN NOT pts THEN bs_round4(f1_raw) END AS f1,
  CASE WHEN NOT pts THEN (severe_omissions + severe_commissions > 0)::DOUBLE END AS severe_rate,
  severe_omissions, severe_commissions,
  CASE WHEN NOT pts THEN pwm END AS matched_positive_weight, CASE WHEN NOT pts THEN pw END AS positive_weight,
  CASE WHEN NOT pts THEN mw END AS matched_weight
FROM f""",
)

_PASS_ORDER = "ORDER BY judge_model, judge_pass"

CASE_SCORES = View(
    "case_scores", "run x completed case",
    "A run's case: the mean over the scored judge's passes (each run's primary judge, all passes), as "
    "`toolkit.selection.per_case`; the statistics are polars' (Kahan mean, Welford sd) bit for bit.",
    (
        ("run_id", "VARCHAR", "Run."), ("case_id", "VARCHAR", "Case."), ("benchmark", "VARCHAR", "Benchmark."),
        ("grading_method", "VARCHAR", "Grading method."),
        ("score", "DOUBLE", "Mean of the passes' scores: the case's score in every summary."),
        ("passes", "INTEGER", "Passes averaged."), ("judges", "INTEGER", "Distinct judges among them."),
        ("pass_score_sd", "DOUBLE", "Sample sd of the passes' scores (null for one pass)."),
        ("precision", "DOUBLE", "Mean precision of the passes (F1-weighted; else null)."),
        ("recall", "DOUBLE", "Mean recall of the passes (F1-weighted; else null)."),
        ("severe_rate", "DOUBLE", "Mean severe_rate of the passes (F1-weighted; else null)."),
        ("position", "INTEGER", "0-based position of the case in its dataset."),
        ("first_success_seq", "BIGINT", "seq of the case's first valid judgment: its place in completion order."),
        ("reported_score", "DOUBLE", "Imported runs: the score the source file wrote on the case's last valid row."),
    ),
    f"""WITH x AS (SELECT x.* FROM pass_scores x JOIN runs r ON r.run_id = x.run_id WHERE {{selection}}),
sc AS (
  SELECT run_id, case_id, first(benchmark {_PASS_ORDER}) AS benchmark,
    first(grading_method {_PASS_ORDER}) AS grading_method,
    bs_kahan_mean(list(score {_PASS_ORDER})) AS score, count(*)::INTEGER AS passes,
    count(DISTINCT judge_model)::INTEGER AS judges, bs_welford_sd(list(score {_PASS_ORDER})) AS pass_score_sd,
    bs_kahan_mean(list(precision {_PASS_ORDER})) AS precision, bs_kahan_mean(list(recall {_PASS_ORDER})) AS recall,
    bs_kahan_mean(list(severe_rate {_PASS_ORDER})) AS severe_rate
  FROM x GROUP BY run_id, case_id),
ok AS (SELECT x.* FROM judgments x JOIN runs r ON r.run_id = x.run_id WHERE {{selection}} AND x.error IS NULL),
fs AS (
  SELECT run_id, case_id, min(seq) AS first_success_seq,
    list(reported_score ORDER BY seq, judge_pass, attempt)[-1] AS reported_score
  FROM ok GROUP BY run_id, case_id)
SELECT sc.run_id, sc.case_id, sc.benchmark, sc.grading_method, sc.score, sc.passes, sc.judges, sc.pass_score_sd,
  sc.precision, sc.recall, sc.severe_rate, c.position, fs.first_success_seq, fs.reported_score
FROM sc JOIN runs r ON r.run_id = sc.run_id
JOIN cases c ON c.dataset_sha256 = r.dataset_sha256 AND c.case_id = sc.case_id
LEFT JOIN fs ON fs.run_id = sc.run_id AND fs.case_id = sc.case_id""",
)

BENCHMARK_SCORES = View(
    "benchmark_scores", "run x benchmark",
    "A run's benchmark mean, as `toolkit.summary` computes it: `math.fsum` of the case scores / n (for "
    "imported runs, in the `auto` order, the scores the source file reported where it did). Intervals: "
    "see `run_intervals`.",
    (
        ("run_id", "VARCHAR", "Run."), ("benchmark", "VARCHAR", "Benchmark."), ("n", "BIGINT", "Completed cases."),
        ("mean", "DOUBLE", "Mean case score."),
        ("ci_low", "DOUBLE", "Bootstrap 95% interval, low end (from run_intervals; null when stale or not computed)."),
        ("ci_high", "DOUBLE", "Bootstrap 95% interval, high end (likewise)."),
    ),
    """WITH v AS (
  SELECT c.run_id, c.benchmark,
    CASE WHEN {order} = 'reference' THEN coalesce(c.reported_score, c.score) ELSE c.score END AS value
  FROM case_scores c JOIN runs r ON r.run_id = c.run_id),
s AS (SELECT run_id, benchmark, count(*) AS n, {sums_value} FROM v GROUP BY run_id, benchmark),
{fsum_b},
b AS (SELECT run_id, benchmark, n, _fsum / n AS mean FROM fb)
SELECT b.run_id, b.benchmark, b.n, b.mean, i.ci_low, i.ci_high
FROM b JOIN runs r ON r.run_id = b.run_id
LEFT JOIN run_intervals i ON i.run_id = b.run_id AND i.benchmark = b.benchmark
  AND i.run_updated_at IS NOT DISTINCT FROM r.updated_at""",
)

RUN_SUMMARY = View(
    "run_summary", "run",
    "A run's summary, the fields of `toolkit.summary.summarize` (the reference summary object) that are one "
    "value each: the leaderboard. `answer_model`/`judge_model` are those of the scored replies (null when "
    "they differ within the run); `errors` counts cases whose latest event failed.",
    (
        ("run_id", "VARCHAR", "Run."), ("answer_model", "VARCHAR", "Answer model of the scored answers."),
        ("judge_model", "VARCHAR", "Judge model of the scored replies."), ("source", "VARCHAR", "collected or imported."),
        ("dataset_sha256", "VARCHAR", "Dataset the run was graded on."),
        ("completed_cases", "BIGINT", "Cases with a score."), ("errors", "BIGINT", "Cases whose latest event is an error."),
        ("overall_macro_mean", "DOUBLE", "fsum of the benchmark means / their number (NaN: no benchmark)."),
        ("ci_low", "DOUBLE", "Bootstrap 95% interval of the macro mean, low end (run_intervals; null when stale)."),
        ("ci_high", "DOUBLE", "Likewise, high end."),
        ("judge_passes_per_answer", "BIGINT", "Distinct passes among the scored replies (1 when none)."),
        ("order", "VARCHAR", "reference or dataset: which scores and order the summary uses."),
        ("started_at", "VARCHAR", "Earliest start time of the run's calls."),
        ("finished_at", "VARCHAR", "Latest finish time of the run's calls."),
    ),
    """WITH s AS (SELECT run_id, count(*) AS nb, {sums_mean} FROM benchmark_scores GROUP BY run_id),
{fsum_r},
bm AS (SELECT run_id, nb, _fsum AS total FROM fr),
done AS (SELECT run_id, count(*) AS completed_cases FROM case_scores GROUP BY run_id),
sel AS (
  SELECT x.* FROM judgments x JOIN runs r ON r.run_id = x.run_id
  JOIN cases c ON c.dataset_sha256 = r.dataset_sha256 AND c.case_id = x.case_id WHERE {selection}),
ans AS (
  SELECT a.* FROM answers a JOIN runs r ON r.run_id = a.run_id
  JOIN cases c ON c.dataset_sha256 = r.dataset_sha256 AND c.case_id = a.case_id),
win AS (
  SELECT run_id, case_id, judge_model, judge_pass, list(answer_attempt ORDER BY seq, attempt)[-1] AS answer_attempt
  FROM sel WHERE error IS NULL GROUP BY run_id, case_id, judge_model, judge_pass),
facts AS (
  SELECT w.run_id, count(DISTINCT struct_pack(a := a.answer_model, j := w.judge_model)) AS models,
    first(a.answer_model) AS answer_model, first(w.judge_model) AS judge_model,
    count(DISTINCT w.judge_pass) AS passes
  FROM win w LEFT JOIN ans a ON a.run_id = w.run_id AND a.case_id = w.case_id AND a.attempt = w.answer_attempt
  GROUP BY w.run_id),
events AS (
  SELECT run_id, case_id, seq, 0 AS stage, error, started_at, finished_at FROM ans
  UNION ALL SELECT run_id, case_id, seq, 1 AS stage, error, started_at, finished_at FROM sel),
errs AS (
  SELECT run_id, count(*) FILTER (WHERE last_error IS NOT NULL) AS errors
  FROM (SELECT run_id, case_id, list(error ORDER BY seq, stage)[-1] AS last_error FROM events GROUP BY run_id, case_id)
  GROUP BY run_id),
span AS (
  SELECT run_id, min(started_at) FILTER (WHERE started_at != '') AS started_at,
    max(finished_at) FILTER (WHERE finished_at != '') AS finished_at
  FROM events GROUP BY run_id)
SELECT r.run_id, CASE WHEN f.models = 1 THEN f.answer_model END AS answer_model,
  CASE WHEN f.models = 1 THEN f.judge_model END AS judge_model, r.source, r.dataset_sha256,
  coalesce(done.completed_cases, 0) AS completed_cases, coalesce(errs.errors, 0) AS errors,
  CASE WHEN bm.nb > 0 THEN bm.total / bm.nb ELSE 'nan'::DOUBLE END AS overall_macro_mean,
  i.ci_low, i.ci_high, coalesce(f.passes, 1) AS judge_passes_per_answer, {order} AS "order",
  span.started_at, span.finished_at
FROM runs r
LEFT JOIN bm ON bm.run_id = r.run_id LEFT JOIN done ON done.run_id = r.run_id
LEFT JOIN facts f ON f.run_id = r.run_id LEFT JOIN errs ON errs.run_id = r.run_id
LEFT JOIN span ON span.run_id = r.run_id
LEFT JOIN run_intervals i ON i.run_id = r.run_id AND i.benchmark IS NULL
  AND i.run_updated_at IS NOT DISTINCT FROM r.updated_at""",
)

DERIVED: tuple[View, ...] = (PASS_SCORES, CASE_SCORES, BENCHMARK_SCORES, RUN_SUMMARY)
