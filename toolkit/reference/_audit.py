"""Audit a published reference result file: every disagreement between its rows, its summary, the
rubric and the dataset, listed (not only the first, as import does) as ``file:line: field: message``.

Row rules are the import's (``toolkit.reference._read``), scores the project's scoring (``pass_scores``),
intervals the reference-exact bootstrap with the summary's own seed and sample count. The summary is
recomputed the way the reference runner writes it: from the scores the rows record, cases in the
order their first successful row fixed, only cases of the dataset.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from toolkit import protocol
from toolkit.bootstrap import BootstrapSettings, reference_intervals
from toolkit.dataset import Dataset, Problem, load_dataset
from toolkit.inputs import RESULT_FILE_LIMIT, InputError, decode_utf8, open_regular, parse_json, read_text, shorten
from toolkit.reference._checks import check_row
from toolkit.scoring import pass_scores, reference_components
from toolkit.summary import SUMMARY_FIELDS

PROBLEM_LIMIT = 1000  # lines kept; the count goes on
SUMMARY_FILE_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class AuditProblem:
    file: str
    line: int | None  # None: about the file (or its summary) as a whole
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


@dataclass(frozen=True)
class AuditReport:
    path: str
    dataset_source: str
    dataset_sha256: str
    summary_path: str | None  # the summary checked, None when there is none beside the file
    rows: int
    success_rows: int
    error_rows: int
    completed_cases: int
    dataset_cases: int
    problems: list[AuditProblem] = field(default_factory=list)  # the first PROBLEM_LIMIT
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path, "dataset": self.dataset_source, "dataset_sha256": self.dataset_sha256,
            "summary_file": self.summary_path, "rows": self.rows, "success_rows": self.success_rows,
            "error_rows": self.error_rows, "completed_cases": self.completed_cases,
            "dataset_cases": self.dataset_cases, "ok": self.ok,
            "problem_count": self.problem_count, "truncated": self.problem_count > len(self.problems),
            "problems": [{"file": p.file, "line": p.line, "field": p.field, "message": p.message}
                         for p in self.problems],
        }


class _Found:
    """Problems as the checks find them; the first ``limit`` in file order are kept (line by line, then those
    about the whole file, then the summary's, each group in the order found), all are counted."""

    def __init__(self, limit: int):
        self.limit, self.count = limit, 0
        self._heap: list[tuple[tuple[int, int, int], AuditProblem]] = []  # max-heap on the negated order key

    def add(self, file: str, line: int | None, fld: str, message: str) -> None:
        self.count += 1
        summary = file.endswith(".summary.json")
        key = (2 if summary else 1 if line is None else 0, line or 0, self.count)
        entry = ((-key[0], -key[1], -key[2]), AuditProblem(file, line, fld, message))
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
        elif entry[0] > self._heap[0][0]:
            heapq.heapreplace(self._heap, entry)

    @property
    def items(self) -> list[AuditProblem]:
        return [p for _, p in sorted(self._heap, reverse=True)]


def summary_path_of(path: Path) -> Path:
    """``<stem>.summary.json`` beside a ``.jsonl`` file (the runner's naming)."""
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(name + ".summary.json")


def audit_file(path: str | os.PathLike[str], dataset: Dataset | str | os.PathLike[str],
               limit: int = PROBLEM_LIMIT) -> AuditReport:
    """Check a reference result file (and ``<stem>.summary.json`` beside it) against ``dataset``.

    Raises ``InputError`` only when the file cannot be read at all (missing, not a regular file,
    not UTF-8); everything else is a problem in the report."""
    path = Path(path)
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset)
    found = _Found(limit)
    rows = _read_rows(path, found)
    file = str(path)
    seen: dict[str, Any] = {}
    in_dataset: list[tuple[int, dict]] = []
    scorable: list[tuple[int, dict]] = []
    for number, row in rows:
        row_problems: list[Problem] = []
        known = check_row(f"{file}:{number}", row, dataset, seen, row_problems)
        for p in row_problems:
            found.add(file, number, p.field, p.message)
        if not known:
            found.add(file, number, "case_id", f"{shorten(repr(row['case_id']), 80)} is not a case of the dataset "
                                               f"{dataset.source} (sha256 {dataset.sha256[:12]})")
            continue
        if not isinstance(row.get("case_id"), str) or not row.get("case_id"):
            continue
        in_dataset.append((number, row))
        if _is_success(row) and not any(p.field.startswith("decisions") for p in row_problems) \
                and isinstance(row.get("decisions"), list):
            scorable.append((number, row))
    _check_scores(file, scorable, dataset, found)
    done = _check_cases(file, in_dataset, dataset, found)
    summary_file = summary_path_of(path)
    checked = None
    if summary_file.exists():
        checked = str(summary_file)
        _check_summary(summary_file, in_dataset, done, dataset, seen, found)
    successes = sum(1 for _, r in rows if _is_success(r))
    return AuditReport(file, str(dataset.source), dataset.sha256, checked, len(rows), successes,
                       sum(1 for _, r in rows if r.get("error")), len(done), len(dataset.raw_cases),
                       found.items, found.count)


def _is_success(row: dict) -> bool:
    return "score" in row and not row.get("error")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_rows(path: Path, found: _Found) -> list[tuple[int, dict]]:
    """(line number, row) of every line that is a JSON object; the others are problems."""
    try:
        with open_regular(path, RESULT_FILE_LIMIT) as handle:
            data = handle.read()
    except OSError as error:
        raise InputError(str(path), "file", error.strerror or str(error)) from None
    rows = []
    for number, raw in enumerate(data.split(b"\n"), start=1):  # LF only, as the runner reads it
        try:  # line by line: one bad byte costs its line, not the audit
            line = decode_utf8(raw, str(path))
        except InputError as error:
            found.add(str(path), number, error.field, error.message)
            continue
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{path}:{number}", position="column {column}", invalid="line is not JSON")
        except InputError as error:
            found.add(str(path), number, error.field, error.message)
            continue
        if not isinstance(row, dict):
            found.add(str(path), number, "row", "must be a JSON object")
            continue
        rows.append((number, row))
    if not rows and found.count == 0:
        found.add(str(path), None, "content", "empty file: no result rows")
    return rows


def _check_scores(file: str, scorable: list[tuple[int, dict]], dataset: Dataset, found: _Found) -> None:
    """Each success row's score and score_components against what its decisions and the rubric give."""
    decisions = [{"run_id": str(number), "case_id": row["case_id"], "judge_model": "", "judge_pass": 1,
                  "item_id": d["item_id"], "matched": d["matched"]}
                 for number, row in scorable for d in row["decisions"]]
    if not decisions:
        return
    frame = pl.DataFrame(decisions, schema_overrides={"judge_pass": pl.Int32})
    recomputed = {int(r["run_id"]): r for r in pass_scores(frame, dataset.rubric_items).iter_rows(named=True)}
    for number, row in scorable:
        got = recomputed.get(number)
        if got is None:
            continue
        if _is_number(row["score"]) and not _same(row["score"], got["score"]):
            found.add(file, number, "score", f"{row['score']!r} but the decisions give {got['score']!r}")
        components = row.get("score_components")
        expected = reference_components(got)
        if not isinstance(components, dict):
            found.add(file, number, "score_components", "missing or not an object")
            continue
        for key, value in expected.items():
            if key not in components:
                found.add(file, number, f"score_components.{key}", f"missing (the decisions give {value!r})")
            elif not _same(components[key], value):
                found.add(file, number, f"score_components.{key}",
                          f"{shorten(repr(components[key]), 60)} but the decisions give {value!r}")
        for key in components.keys() - expected.keys():
            found.add(file, number, f"score_components.{key}",
                      f"not a component of a {got['grading_method']} score")


def _same(a: Any, b: Any) -> bool:
    """Numerically equal (0 == 0.0), nulls alike, NaN equal to NaN; a boolean is not a number."""
    if a is None or b is None:
        return a is None and b is None
    if not (_is_number(a) and _is_number(b)):
        return False
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _check_cases(file: str, in_dataset: list[tuple[int, dict]], dataset: Dataset,
                 found: _Found) -> dict[str, tuple[int, dict]]:
    """Duplicated successes and dataset cases without one; returns case -> (line, winning row) in the
    reference's order (a case keeps the place of its first successful row, the last one wins)."""
    done: dict[str, tuple[int, dict]] = {}
    first: dict[str, int] = {}
    last_row: dict[str, tuple[int, dict]] = {}
    for number, row in in_dataset:
        case_id = row["case_id"]
        last_row[case_id] = (number, row)
        if not _is_success(row):
            continue
        if case_id in first:
            found.add(file, number, "case_id", f"case {case_id} has another successful row (line {first[case_id]}); "
                                               "the reference keeps this later one")
        else:
            first[case_id] = number
        done[case_id] = (number, row)
    for case in dataset.raw_cases:
        case_id = case["case_id"]
        if case_id in done:
            continue
        last = last_row.get(case_id)
        why = f"; its last row (line {last[0]}) is an error" if last else ""
        found.add(file, None, "case_id", f"case {case_id} ({case['benchmark']}) of the dataset has no successful "
                                         f"row{why}")
    return done


def _check_summary(summary_file: Path, in_dataset: list[tuple[int, dict]], done: dict[str, tuple[int, dict]],
                   dataset: Dataset, seen: dict[str, Any], found: _Found) -> None:
    where = str(summary_file)
    try:
        summary = json.loads(read_text(summary_file, SUMMARY_FILE_LIMIT))
    except (InputError, OSError, ValueError) as error:
        message = error.message if isinstance(error, InputError) else getattr(error, "strerror", None) or str(error)
        found.add(where, None, "file", f"unreadable summary: {shorten(str(message), 200)}")
        return
    if not isinstance(summary, dict):
        found.add(where, None, "summary", "must be a JSON object")
        return
    for key in SUMMARY_FIELDS:
        if key not in summary:
            found.add(where, None, key, "missing")
    for key in summary.keys() - set(SUMMARY_FIELDS):
        found.add(where, None, key, "not a field of the reference summary")
    samples, seed = summary.get("bootstrap_samples"), summary.get("bootstrap_seed")
    try:
        settings = BootstrapSettings(samples=samples, seed=seed)
    except ValueError:
        settings = None
        if "bootstrap_samples" in summary and "bootstrap_seed" in summary:
            found.add(where, None, "bootstrap_samples", f"{shorten(repr(samples), 40)} / seed "
                                                        f"{shorten(repr(seed), 40)}: intervals not checked")
    expected = _expected_summary(in_dataset, done, dataset, seen, settings)
    if summary.get("dataset_sha256") != dataset.sha256 and "dataset_sha256" in summary:
        found.add(where, None, "dataset_sha256", f"{shorten(repr(summary['dataset_sha256']), 80)} but the dataset "
                                                 f"{dataset.source} has {dataset.sha256}")
    for key, value in expected.items():
        if key in ("dataset_sha256", "benchmarks") or key not in summary:
            continue
        if settings is None and (key.endswith("ci95") or key.startswith("bootstrap_")):
            continue
        _compare(where, key, summary[key], value, found)
    benchmarks = summary.get("benchmarks")
    if "benchmarks" in summary and not isinstance(benchmarks, dict):
        found.add(where, None, "benchmarks", "must be an object")
        return
    for name, want in expected["benchmarks"].items():
        have = (benchmarks or {}).get(name)
        if not isinstance(have, dict):
            found.add(where, None, f"benchmarks.{name}", f"missing (the rows give n={want['n']})")
            continue
        for key, value in want.items():
            if key == "ci95" and settings is None:
                continue
            _compare(where, f"benchmarks.{name}.{key}", have.get(key), value, found)
    for name in sorted((benchmarks or {}).keys() - expected["benchmarks"].keys()):
        found.add(where, None, f"benchmarks.{name}", "no successful row of this benchmark")


def _compare(where: str, key: str, have: Any, want: Any, found: _Found) -> None:
    if isinstance(want, list):
        ok = isinstance(have, list) and len(have) == len(want) and all(_same(h, w) for h, w in zip(have, want))
    elif _is_number(want):
        ok = _same(have, want)
    else:
        ok = have == want and type(have) is type(want)
    if not ok:
        found.add(where, None, key, f"{shorten(repr(have), 80)} but the rows give {want!r}")


def _expected_summary(in_dataset: list[tuple[int, dict]], done: dict[str, tuple[int, dict]], dataset: Dataset,
                      seen: dict[str, Any], settings: BootstrapSettings | None) -> dict[str, Any]:
    """The summary the reference runner writes for these rows (scores as recorded)."""
    winners = [row for _, row in done.values() if _is_number(row.get("score"))]
    values: dict[str, list[float]] = {}
    for row in winners:
        values.setdefault(row.get("benchmark") or dataset.case(row["case_id"])["benchmark"], []).append(
            float(row["score"]))
    names = sorted(values)
    intervals = reference_intervals({n: values[n] for n in names}, settings) if settings else None
    benchmarks = {n: {"n": len(values[n]), "mean": statistics.fmean(values[n]),
                      "ci95": list(intervals.benchmarks[n]) if intervals else None} for n in names}
    models = {(r.get("answer_model"), r.get("judge_model")) for r in winners}
    temps = {(r.get("answer_temperature"), r.get("judge_temperature")) for r in winners}
    model = next(iter(models)) if len(models) == 1 else (None, None)
    temp = next(iter(temps)) if len(temps) == 1 else (None, None)
    starts = [r["started_at"] for _, r in in_dataset if isinstance(r.get("started_at"), str) and r["started_at"]]
    ends = [r["finished_at"] for _, r in in_dataset if isinstance(r.get("finished_at"), str) and r["finished_at"]]
    last = {r["case_id"]: r for _, r in in_dataset}
    return {
        "protocol_version": seen.get("protocol_version", protocol.PROTOCOL_VERSION),
        "dataset_sha256": dataset.sha256, "answer_model": model[0], "judge_model": model[1],
        "answer_temperature": temp[0], "judge_temperature": temp[1], "judge_passes_per_answer": 1,
        "started_at": min(starts) if starts else None, "finished_at": max(ends) if ends else None,
        "completed_cases": len(done), "errors": sum(1 for r in last.values() if r.get("error")),
        "overall_macro_mean": statistics.fmean(b["mean"] for b in benchmarks.values()) if benchmarks else math.nan,
        "overall_ci95": list(intervals.overall) if intervals else None,
        "benchmarks": benchmarks,
        "bootstrap_samples": settings.samples if settings else None,
        "bootstrap_seed": settings.seed if settings else None,
    }
