"""Every stored table's schema, defined once.

The Parquet files, the DuckDB views and the documentation in ``schemas/``
all come from these definitions (``python -m toolkit.sql._schema_docs`` rewrites
the docs; a test fails when they are stale).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

UTF8 = pa.string()
I32 = pa.int32()
I64 = pa.int64()
F64 = pa.float64()
BOOL = pa.bool_()


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    grain: str  # one row per ...
    key: tuple[str, ...]
    partition: str  # the column whose value names the table's sub-directory
    doc: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable, metadata={"doc": c.doc}) for c in self.columns],
            metadata={"table": self.name, "grain": self.grain},
        )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


RUN_ID = _c("run_id", UTF8, "Run identifier (any text; stored under a path-safe encoding).", False)
CASE_ID = _c("case_id", UTF8, "Case identifier from the dataset.", False)
JUDGE_MODEL = _c("judge_model", UTF8, "Judge model identifier as sent to the endpoint.", False)
JUDGE_PASS = _c("judge_pass", I32, "Independent judge pass, 1-based.", False)
SAMPLE = _c("sample", I32, "0-based answer sample of the case: 0 for a run asked once and for every run stored before samples existed.", False)
SEQ = _c("seq", I64, "Completion order within the run (reference files: line number); resumes continue it.", False)
STARTED = _c("started_at", UTF8, "ISO-8601 UTC start time, as recorded (text, so imported values round-trip).")
FINISHED = _c("finished_at", UTF8, "ISO-8601 UTC finish time, as recorded.")
LATENCY = _c("latency_s", F64, "Wall seconds of the successful HTTP call (null when unknown, e.g. imported).")
PROMPT_TOK = _c("prompt_tokens", I64, "Prompt tokens reported by the provider.")
COMPL_TOK = _c("completion_tokens", I64, "Completion tokens reported by the provider (reasoning included).")
REASON_TOK = _c("reasoning_tokens", I64, "Reasoning tokens reported by the provider, when it reports them.")
FINISH = _c("finish_reason", UTF8, "Provider finish reason (stop, length, ...).")
ERROR = _c("error", UTF8, "Null on success; otherwise 'Type: message' (at most 2,000 characters).")

CASES = Table(
    "cases", "case", ("dataset_sha256", "case_id"), "dataset_sha256",
    "The cases of each dataset a run used, in load order.",
    (
        _c("dataset_sha256", UTF8, "Digest of the dataset the case belongs to.", False),
        CASE_ID,
        _c("benchmark", UTF8, "Benchmark (panel) name.", False),
        _c("grading_method", UTF8, "points_rubric or f1_weighted_rubric.", False),
        _c("prompt", UTF8, "The clinical prompt, sent unchanged to the answer model.", False),
        _c("split", UTF8, "train or test."),
        _c("position", I32, "0-based position in load order (registry -> manifest order).", False),
        _c("n_items", I32, "Number of rubric items.", False),
    ),
)

RUBRIC_ITEMS = Table(
    "rubric_items", "rubric item", ("dataset_sha256", "item_id"), "dataset_sha256",
    "Rubric items with their derived severity class and F1 weight.",
    (
        _c("dataset_sha256", UTF8, "Digest of the dataset the item belongs to.", False),
        CASE_ID,
        _c("benchmark", UTF8, "Benchmark of the case.", False),
        _c("grading_method", UTF8, "Grading method of the case.", False),
        _c("item_id", UTF8, "md5(prompt)_{index}; unique across the dataset.", False),
        _c("item_index", I32, "0-based position in the case's rubric.", False),
        _c("text", UTF8, "The criterion text.", False),
        _c("points", F64, "Signed points.", False),
        _c("severity_class", I32, "f1_weighted_rubric only: class 1-9 from the points (null otherwise)."),
        _c("weight", F64, "f1_weighted_rubric only: F1 weight of the class (null otherwise)."),
    ),
)

RUNS = Table(
    "runs", "run", ("run_id",), "run_id",
    "One row per run: what was evaluated, on which dataset, how it got here.",
    (
        RUN_ID,
        _c("answer_model", UTF8, "Answer model identifier."),
        _c("judge_model", UTF8, "The run's primary judge (the default judge of its summary)."),
        _c("protocol_version", UTF8, "Grading protocol version.", False),
        _c("dataset_sha256", UTF8, "Digest of the dataset the run was graded on.", False),
        _c("source", UTF8, "collected or imported.", False),
        _c("source_file", UTF8, "For imported runs: the file it came from."),
        _c("answer_reasoning_effort", UTF8, "Reasoning effort requested of the answer model."),
        _c("created_at", UTF8, "ISO-8601 UTC time the run row was written.", False),
        _c("settings", UTF8, "JSON object of the run's latest settings (endpoints without keys, concurrency, "
                             "selection, ...)."),
        _c("steps", UTF8, "JSON list of every step that wrote the run (import, run, judge), each with its time and "
                          "settings, oldest first: nothing is overwritten."),
        _c("updated_at", UTF8, "ISO-8601 UTC time of the run's latest commit."),
        _c("write_ids", UTF8, "JSON object of the run's live write ids and the rows each committed by table (earlier "
           "stores: a JSON list of ids): the store's commit point (see below)."),
        _c("listing", UTF8, "JSON of what `bedside runs` lists of the run, set in its latest commit (else null)."),
    ),
)

ANSWERS = Table(
    "answers", "answer call attempt", ("run_id", "case_id", "sample", "attempt"), "run_id",
    "Answers and failed answer attempts, with call metadata.",
    (
        RUN_ID, CASE_ID, SAMPLE,
        _c("attempt", I32, "1-based attempt number for the case's sample.", False),
        SEQ,
        _c("answer_model", UTF8, "Answer model identifier as sent."),
        _c("answer", UTF8, "Raw answer text (null when the attempt failed)."),
        _c("answer_temperature", F64, "Temperature sent; null when the provider default was used."),
        _c("reasoning_effort", UTF8, "Reasoning effort sent, if any."),
        STARTED, FINISHED, LATENCY, PROMPT_TOK, COMPL_TOK, REASON_TOK, FINISH, ERROR,
    ),
)

JUDGMENTS = Table(
    "judgments", "judge call", ("run_id", "case_id", "sample", "judge_model", "judge_pass", "attempt"), "run_id",
    "Every judge call with its raw reply; error is null when the reply passed validation.",
    (
        RUN_ID, CASE_ID, SAMPLE, JUDGE_MODEL, JUDGE_PASS,
        _c("attempt", I32, "1-based call number for this case, sample, judge and pass (re-asks count).", False),
        _c("answer_attempt", I32, "The answers.attempt that was judged."),
        SEQ,
        _c("judge_temperature", F64, "Temperature sent; null when the provider default was used."),
        STARTED, FINISHED, LATENCY,
        _c("elapsed_seconds", F64, "Seconds from the start of the answer call to the end of this judgment."),
        PROMPT_TOK, COMPL_TOK, REASON_TOK, FINISH,
        _c("raw_reply", UTF8, "The judge's reply text, unmodified."),
        ERROR,
        _c("reported_score", F64, "Imported runs: the score written in the source file."),
        _c("reported_components", UTF8, "Imported runs: score_components from the source file (JSON)."),
    ),
)

DECISIONS = Table(
    "decisions", "run x case x sample x judge x pass x valid reply x item",
    ("run_id", "case_id", "sample", "judge_model", "judge_pass", "judgment_attempt", "item_id"), "run_id",
    "The decisions of every valid judge reply on each rubric item. A pass is scored from its latest valid "
    "reply (imported files can hold several successful rows for a case: the last one wins, as in the reference).",
    (
        RUN_ID, CASE_ID, SAMPLE, JUDGE_MODEL, JUDGE_PASS,
        _c("item_id", UTF8, "Rubric item.", False),
        _c("matched", BOOL, "True when the judge found the answer states or endorses the item.", False),
        _c("judgment_attempt", I32, "The judgments.attempt whose reply these decisions come from.", False),
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in (CASES, RUBRIC_ITEMS, RUNS, ANSWERS, JUDGMENTS, DECISIONS)}

# Human review: the store's own rows, not a run's (no write ids): visible once their one commit lands.
REVIEWS = Table(
    "reviews", "answer shown in a review page", ("review_id", "position"), "review_id",
    "Written by `bedside review` in one commit with the page: the key that unblinds it. The page holds only "
    "`blind_id`; which run, case and answer sample each one is stays here.",
    (
        _c("review_id", UTF8, "Random opaque id of one generated page (the page and its exported labels name it).",
           False),
        _c("created_at", UTF8, "ISO-8601 UTC time the page was written.", False),
        _c("seed", I64, "Seed of the page's case and answer order.", False),
        _c("position", I32, "0-based order of the answer in the page.", False),
        _c("blind_id", UTF8, "Random opaque id of the answer: the only one the page holds.", False),
        RUN_ID, CASE_ID, SAMPLE,
        _c("answer_sha256", UTF8, "SHA-256 of the answer text shown: labels made in the page count for this "
           "answer only.", False),
    ),
)

HUMAN_LABELS = Table(
    "human_labels", "label of one reviewer on one rubric item of one answer",
    ("reviewer", "run_id", "case_id", "sample", "answer_sha256", "item_id"), "run_id",
    "Reviewers' (physicians') labels, imported by `bedside labels import` from a review page's export or a "
    "CSV/JSONL table. Several reviewers may label an item; one reviewer labels it once. Judge decisions are "
    "never changed by them. A label is about one answer text: once the run holds another answer there (it was "
    "collected again), the label no longer counts and readers leave it out.",
    (
        _c("review_id", UTF8, "The review page the label was made in (null: imported from a CSV/JSONL table)."),
        _c("reviewer", UTF8, "Who labelled, as they named themselves.", False),
        RUN_ID, CASE_ID, _c("sample", I32, "0-based answer sample labelled (0 when the table gave none).", False),
        _c("answer_sha256", UTF8, "SHA-256 of the answer text labelled (the run's answer when it was imported).",
           False),
        _c("item_id", UTF8, "Rubric item.", False),
        _c("label", UTF8, "met, not_met or unsure.", False),
        _c("labelled_at", UTF8, "ISO-8601 UTC time the label was made (null when unknown)."),
    ),
)

LABEL_TABLES: dict[str, Table] = {t.name: t for t in (REVIEWS, HUMAN_LABELS)}
RUN_TABLES = ("runs", "answers", "judgments", "decisions")
DATASET_TABLES = ("cases", "rubric_items")

# The scores, stored as data: computed by the toolkit for a run's whole data at each of its commits, in that
# commit, so readers take the numbers as they are. Primary judge (``*_by_judge``: all), all passes, ``auto`` order.
_RUN, _CASE, _BENCH = _c("run_id", UTF8, "Run.", False), _c("case_id", UTF8, "Case.", False), \
    _c("benchmark", UTF8, "Benchmark of the case.")
_METHOD = _c("grading_method", UTF8, "Grading method of the case.")
_SAMPLE = _c("sample", I32, "0-based answer sample of the case (0 for a run asked once).", False)

PASS_SCORES = Table(
    "pass_scores", "run x case x sample x judge x pass (every judge and pass a run holds)", (
        "run_id", "case_id", "sample", "judge_model", "judge_pass"), "run_id",
    "Each judge pass scored from its latest valid reply against the run's dataset rubric, by "
    "`toolkit.scoring.pass_scores` (points rubric: matched signed points / available positive points, clamped "
    "to [0, 1]; F1-weighted rubric: severity-weighted precision, recall and F1, each rounded like Python's "
    "`round(x, 4)`).",
    (
        _RUN, _CASE, _SAMPLE, _c("judge_model", UTF8, "Judge model of the pass.", False),
        _c("judge_pass", I32, "Pass number, 1-based.", False), _BENCH, _METHOD,
        _c("score", F64, "The pass's score in [0, 1]: clamped raw score (points) or rounded F1 (F1-weighted)."),
        _c("n_decided", I32, "Rubric items the reply decided."), _c("n_matched", I32, "Items judged present."),
        _c("matched_signed_points", F64, "Points rubric: sum of the matched items' signed points (else null)."),
        _c("available_positive_points", F64, "Points rubric: sum of the positive points (else null)."),
        _c("raw_score", F64, "Points rubric: the ratio before clamping (else null)."),
        _c("precision", F64, "F1-weighted: matched positive weight / matched weight, rounded (null when nothing "
                             "matched; null for the points rubric)."),
        _c("recall", F64, "F1-weighted: matched positive weight / positive weight, rounded (else null)."),
        _c("f1", F64, "F1-weighted: 2PR/(P+R) of the unrounded P and R, rounded (else null)."),
        _c("severe_rate", F64, "F1-weighted: 1.0 when a +3 item was missed or a -3 item endorsed, else 0.0."),
        _c("severe_omissions", I32, "Missed items of class 9 (+3 points)."),
        _c("severe_commissions", I32, "Endorsed items of class 1 (-3 points)."),
        _c("matched_positive_weight", F64, "F1-weighted: summed weight of matched positive items (else null)."),
        _c("positive_weight", F64, "F1-weighted: summed weight of positive items (else null)."),
        _c("matched_weight", F64, "F1-weighted: summed weight of matched items (else null)."),
    ),
)

SAMPLE_SCORES = Table(
    "sample_scores", "run x completed case x sample", ("run_id", "case_id", "sample"), "run_id",
    "One answer of a run's case: the mean over the scored judge's passes of that sample (each run's primary "
    "judge, all passes), as `toolkit.selection.per_sample` computes it. A case's score is the mean of its "
    "samples' scores; a run asked once has one sample per case, sample 0.",
    (
        _RUN, _CASE, _SAMPLE, _c("benchmark", UTF8, "Benchmark."),
        _c("score", F64, "Mean of the sample's passes' scores."),
        _c("passes", I32, "Passes averaged."),
    ),
)

CASE_SCORES = Table(
    "case_scores", "run x completed case", ("run_id", "case_id"), "run_id",
    "A run's case: the mean over its samples (`sample_scores`) of the mean over the scored judge's passes "
    "(each run's primary judge, all passes), as `toolkit.selection.per_case` computes it.",
    (
        _RUN, _CASE, _c("benchmark", UTF8, "Benchmark."), _c("grading_method", UTF8, "Grading method."),
        _c("score", F64, "Mean of the samples' mean pass scores (one sample: of the passes' scores): the "
                         "case's score in every summary."),
        _c("passes", I32, "Passes averaged, over all samples."), _c("judges", I32, "Distinct judges among them."),
        _c("pass_score_sd", F64, "Sample sd of the passes' scores, over all samples (null for one pass)."),
        _c("precision", F64, "Mean precision of the passes, by sample as the score (F1-weighted; else null)."),
        _c("recall", F64, "Mean recall of the passes, by sample as the score (F1-weighted; else null)."),
        _c("severe_rate", F64, "Mean severe_rate of the passes, by sample as the score (F1-weighted; else null)."),
        _c("position", I32, "0-based position of the case in its dataset."),
        _c("first_success_seq", I64, "seq of the case's first valid judgment: its place in completion order."),
        _c("reported_score", F64, "Imported runs: the score the source file wrote on the case's last valid row."),
    ),
)

BENCHMARK_SCORES = Table(
    "benchmark_scores", "run x benchmark", ("run_id", "benchmark"), "run_id",
    "A run's benchmark mean, as `toolkit.summary` computes it: `math.fsum` of the case scores / n (for "
    "imported runs, in the `auto` order, the scores the source file reported where it did).",
    (_RUN, _c("benchmark", UTF8, "Benchmark."), _c("n", I64, "Completed cases."),
     _c("mean", F64, "Mean case score.")),
)

RUN_SUMMARY = Table(
    "run_summary", "run", ("run_id",), "run_id",
    "A run's summary, the fields of `toolkit.summary.summarize` (the reference summary object) that are one "
    "value each: the leaderboard. `answer_model`/`judge_model` are those of the scored replies (null when "
    "they differ within the run); `errors` counts cases whose latest event failed.",
    (
        _RUN, _c("answer_model", UTF8, "Answer model of the scored answers."),
        _c("judge_model", UTF8, "Judge model of the scored replies."), _c("source", UTF8, "collected or imported."),
        _c("dataset_sha256", UTF8, "Dataset the run was graded on."),
        _c("completed_cases", I64, "Cases with a score."),
        _c("errors", I64, "Cases whose latest event is an error."),
        _c("overall_macro_mean", F64, "fsum of the benchmark means / their number (NaN: no benchmark)."),
        _c("judge_passes_per_answer", I64, "Distinct passes among the scored replies (1 when none)."),
        _c("order", UTF8, "reference or dataset: which scores and order the summary uses."),
        _c("started_at", UTF8, "Earliest start time of the run's calls."),
        _c("finished_at", UTF8, "Latest finish time of the run's calls."),
    ),
)

RELIABILITY_SCORES = Table(
    "reliability_scores", "run x benchmark x k (benchmark null: the run's macro over benchmarks)",
    ("run_id", "benchmark", "k"), "run_id",
    "How reliably a run's answers score, from `sample_scores` by `toolkit.scoring.reliability_scores` (the "
    "arithmetic `bedside variance` uses): per case with K answers, worst-at-k is the expected minimum score of "
    "k of them (mean over all k-subsets) and pass^k the share of k-subsets whose answers all score at least "
    "`threshold`; both averaged over the benchmark's cases with at least k answers. The row with benchmark "
    "null is the macro mean over the run's benchmarks (present when each has cases with k answers). k = 1: "
    "worst_at_k is the benchmark mean (the run's overall mean in the null row).",
    (
        _RUN, _c("benchmark", UTF8, "Benchmark; null: the macro mean over the run's benchmarks."),
        _c("k", I32, "Answers drawn per case, 1 .. the most answers a case has.", False),
        _c("cases", I32, "Cases with at least k answers averaged (null row: their sum over benchmarks)."),
        _c("worst_at_k", F64, "Mean over cases of the expected minimum score of k answers."),
        _c("pass_k", F64, "Mean over cases of the chance that k answers all score at least the threshold."),
        _c("threshold", F64, "Score an answer needs to pass (1.0: a perfect score, both rubric kinds)."),
    ),
)

BY_JUDGE = tuple(Table(f"{t.name}_by_judge", f"{t.grain} x judge", ("run_id", "judge_model", *t.key[1:]), "run_id",
    f"`{t.name}` of every judge with a scored reply, as of the primary judge.", (t.columns[0], JUDGE_MODEL, _c(
    "primary_judge", BOOL, "The run's primary judge?", False), *(c for c in t.columns[1:] if c.name != "judge_model")))
    for t in (BENCHMARK_SCORES, RUN_SUMMARY))  # every judge of each run (all passes, ``auto`` order)
# run_summary stays last: a run's scores write is the one that committed its rows (``store.live.scores_write``).
SCORE_TABLES: dict[str, Table] = {t.name: t for t in (PASS_SCORES, SAMPLE_SCORES, CASE_SCORES, BENCHMARK_SCORES,
                                                      RELIABILITY_SCORES, *BY_JUDGE, RUN_SUMMARY)}
LATER_SCORES = ("sample_scores", "reliability_scores", *(t.name for t in BY_JUDGE))  # added later: readers compute
STORED: dict[str, Table] = {**TABLES, **SCORE_TABLES, **LABEL_TABLES}  # every table the store keeps
# Columns added after stores were first written, with the value every older row holds: files that lack them
# read as if they had them, and a table gains them on its next write; no migration step.
FILLED: dict[str, int | None] = {SAMPLE.name: 0, "listing": None}
# Runs columns the store's scorer sets in each commit (null when it did not: readers compute them).
SCORED_RUN_COLUMNS = ("listing",)


# Arrow is built through polars here: pyarrow's own conversions of Python values (pa.array, from_pylist,
# Schema.empty_table, pa.scalar) import pandas when it is installed, most of a second of a cold start.
_OLDEST = pl.CompatLevel.oldest()  # plain (large_)string arrays, never string views: any pyarrow reads them
_POLARS: dict[pa.DataType, Any] = {UTF8: pl.String, I32: pl.Int32, I64: pl.Int64, F64: pl.Float64, BOOL: pl.Boolean}


def polars_type(kind: pa.DataType) -> Any:
    """The polars type of a stored column's Arrow type."""
    return _POLARS[kind]


def polars_schema(table: str, columns: list[str] | None = None) -> pl.Schema:
    """The polars types of a stored table's columns (all, or ``columns`` in that order)."""
    schema = STORED[table].schema
    return pl.Schema({c: polars_type(schema.field(c).type) for c in (columns or schema.names)})


def empty(table: str, columns: list[str] | None = None) -> pa.Table:
    """No rows of the table (all its columns, or ``columns`` in that order)."""
    schema = STORED[table].schema
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)
    return pa.Table.from_batches([], schema)


def constant(value: Any, n: int, kind: pa.DataType) -> pa.Array:
    """``n`` copies of ``value`` as an Arrow array of type ``kind`` (a column every row of a write shares)."""
    return pl.repeat(value, n, dtype=polars_type(kind), eager=True).to_arrow(compat_level=_OLDEST).cast(kind)


def arrow_table(columns: dict[str, list], schema: pa.Schema) -> pa.Table:
    """Python values by column as an Arrow table of exactly ``schema`` (types, nullability, metadata).

    A value polars will not take as the column's type (a float in an integer column, a number that does
    not fit) goes through pyarrow's own conversion, which accepts or refuses it as it always has."""
    try:
        arrays = [pl.Series(f.name, columns[f.name], dtype=polars_type(f.type), strict=True)
                  .to_arrow(compat_level=_OLDEST).cast(f.type) for f in schema]
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pa.Table.from_pydict(columns, schema=schema)
    return pa.Table.from_arrays(arrays, schema=schema)


def to_arrow(table: str, rows: list[dict] | dict[str, list]) -> pa.Table:
    """Rows (list of dicts or dict of columns) as an Arrow table of exactly the table's schema; a ``FILLED``
    column the rows leave out (or null) holds its old value (``sample``: 0, an answer asked once)."""
    schema = STORED[table].schema
    if isinstance(rows, dict):
        n = len(next(iter(rows.values()), []))
        columns = {c: rows.get(c, [None] * n) for c in schema.names}
    else:
        columns = {c: [r.get(c) for r in rows] for c in schema.names}
    for c in FILLED.keys() & set(columns):
        if None in columns[c]:
            columns[c] = [FILLED[c] if v is None else v for v in columns[c]]
    return arrow_table(columns, schema)
