"""Why cases failed: the stored error texts grouped by cause, with the first message of each.

An error text is stored as ``Type: message`` (``toolkit.collect.client``); the openai SDK words an HTTP
failure as ``Error code: 500 - {'error': {'message': ...}}``, so the cause is the type plus the status
code when there is one (``InternalServerError 500``), and the message is the provider's own message
when it can be found, else the rest of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit.store import Store

MESSAGE_CHARS = 80  # a cause line stays on one terminal line or so


@dataclass(frozen=True)
class Cause:
    cause: str
    cases: int
    first_message: str

    def __str__(self) -> str:
        return f"{self.cases} × {self.cause}: {self.first_message}"


def causes_of(errors: pl.DataFrame) -> list[Cause]:
    """Group failures by cause. ``errors``: one row per failed case with ``error`` (the text) and
    ``seq`` (order: the first message of a cause is that of its smallest seq). Most frequent first."""
    return causes_by_run(errors.with_columns(run_id=pl.lit(""))).get("", [])


def causes_by_run(errors: pl.DataFrame) -> dict[str, list[Cause]]:
    """``causes_of`` of each run's rows of ``errors`` (a ``run_id`` column too), in one pass: run -> causes."""
    if errors.is_empty():
        return {}
    text = pl.col("error").fill_null("unknown error")
    kind = text.str.extract(r"^([A-Za-z_][\w.]*)\s*:", 1).fill_null("Error")
    status = text.str.extract(r"Error code: (\d{3})", 1)
    rest = text.str.replace(r"^[A-Za-z_][\w.]*\s*:\s*", "").str.replace(r"^Error code: \d{3} - ", "")
    quoted = text.str.extract(r"""['"]message['"]: ['"]([^'"]*)['"]""", 1)
    frame = errors.with_columns(
        cause=pl.when(status.is_not_null()).then(pl.format("{} {}", kind, status)).otherwise(kind),
        message=pl.coalesce(quoted, rest).str.strip_chars(),
    ).sort("seq", nulls_last=True)
    grouped = frame.group_by("run_id", "cause", maintain_order=True).agg(
        pl.len().alias("cases"), pl.col("message").first()).sort("cases", "cause", descending=[True, False])
    out: dict[str, list[Cause]] = {}
    for run, c, n, m in grouped.select("run_id", "cause", "cases", "message").iter_rows():
        out.setdefault(run, []).append(Cause(c, n, _clip(m)))
    return out


def failed_cases(answers: pl.DataFrame, judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per run and case that is failed now (run_id, case_id, error, seq): an answer sample that never
    succeeded, or a judge pass without a valid reply (its latest error counts); a case counts once, by its
    latest failure."""
    answered = answers.filter(pl.col("error").is_null()).select("run_id", "case_id", "sample").unique()
    failed_answers = (answers.join(answered, on=["run_id", "case_id", "sample"], how="anti")
                      .sort("seq").group_by("run_id", "case_id", "sample")
                      .agg(pl.col("error").last(), pl.col("seq").last()))
    pass_key = ["run_id", "case_id", "sample", "judge_model", "judge_pass"]
    valid = judgments.filter(pl.col("error").is_null()).select(pass_key).unique()
    failed_passes = (judgments.join(valid, on=pass_key, how="anti")
                     .sort("seq").group_by(pass_key).agg(pl.col("error").last(), pl.col("seq").last()))
    return (pl.concat([failed_answers.select("run_id", "case_id", "error", "seq"),
                       failed_passes.select("run_id", "case_id", "error", "seq")])
            .sort("seq").group_by("run_id", "case_id").agg(pl.col("error").last(), pl.col("seq").last()))


def failure_causes(store: Store, run_id: str) -> list[Cause]:
    """The cases of a stored run that are failed now, by cause (``failed_cases``)."""
    answers = store.read("answers", [run_id], columns=["run_id", "case_id", "sample", "attempt", "seq", "error"])
    judgments = store.read("judgments", [run_id], columns=["run_id", "case_id", "sample", "judge_model", "judge_pass",
                                                          "attempt", "seq", "error"])
    return causes_by_run(failed_cases(answers, judgments)).get(run_id, [])


def causes_line(causes: list[Cause]) -> str:
    """``3 cases failed: 2 × APITimeoutError: Request timed out., 1 × InternalServerError 500: busy``."""
    total = sum(c.cases for c in causes)
    return f"{total} case{'s' if total != 1 else ''} failed: " + ", ".join(str(c) for c in causes)


def _clip(message: str | None) -> str:
    message = " ".join((message or "").split())
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"
