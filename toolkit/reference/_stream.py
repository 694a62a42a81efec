"""A reference result file read as a stream: line by line, each row checked as it comes, turned into store
rows a chunk at a time. Memory holds one chunk and a little state per case (attempt counters, the
models seen, completed cases), never the file: a 450 MB file imports in well under a gigabyte.

What needs the whole file is kept as that small state: a later success of a case supersedes an earlier
one through the attempt numbers the store rows carry (the summary picks the last), the mixed-models
check through ``seen``, the completed count through a set of case ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from toolkit.dataset import Problem
from toolkit.inputs import RESULT_FILE_LIMIT, InputError, open_regular, parse_json
from toolkit.reference._checks import RowChecker
from toolkit.scoring import pass_scores
from toolkit.tables import to_arrow

KEPT_PROBLEMS = 100  # problems listed in an ImportError_ (the rest are counted)


class ImportError_(ValueError):
    """A result file that cannot be imported; nothing was written. ``total``: problems found, of which
    ``problems`` lists the first."""

    def __init__(self, problems: list[Problem], total: int | None = None):
        self.problems = problems
        self.total = max(total or 0, len(problems))
        others = self.total - 1
        more = f" (and {others} more problem{'s' * (others > 1)} in the file)" if others else ""
        super().__init__(f"{problems[0]}{more}")


class Problems:
    """The problems of one kind found in a file: the first ``KEPT_PROBLEMS`` and how many in all (a file
    of a million bad lines must not fill memory with messages)."""

    def __init__(self) -> None:
        self.first: list[Problem] = []
        self.count = 0

    def add(self, problem: Problem) -> None:
        self.count += 1
        if len(self.first) < KEPT_PROBLEMS:
            self.first.append(problem)

    def error(self) -> ImportError_:
        return ImportError_(self.first, self.count)


def iter_result_rows(path: Path, problems: Problems) -> Iterator[tuple[int, dict[str, Any], int]]:
    """(line number, row, bytes of its line) of each JSON-object line of a reference JSONL file, in file
    order. A line that is not a JSON object is added to ``problems`` and skipped; a file that cannot be
    opened or read, or that is not UTF-8, raises ImportError_ (that problem alone, as when the whole file
    was decoded first). Only a regular file of at most RESULT_FILE_LIMIT bytes is read; every value must
    be one a table can hold (``toolkit.inputs.parse_json``)."""
    try:
        handle = open_regular(path, RESULT_FILE_LIMIT)
    except InputError as error:
        raise ImportError_([Problem(error.file, error.field, error.message)]) from None
    offset = 0
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline()  # ends at LF only, as the runner reads its file (not at U+2028)
            except OSError as error:
                raise ImportError_([Problem(str(path), "file", error.strerror or str(error))]) from None
            if not raw:
                return
            number += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ImportError_([Problem(str(path), "encoding", f"not UTF-8 (byte {offset + error.start})")]) from None
            offset += len(raw)
            if line.endswith("\n"):
                line = line[:-1]
            if not line.strip():
                continue
            try:
                row = parse_json(line, f"{path}:{number}", position="column {column}", invalid="line is not JSON")
            except InputError as error:
                problems.add(Problem(error.file, error.field, error.message))
                continue
            if not isinstance(row, dict):
                problems.add(Problem(f"{path}:{number}", "row", "must be a JSON object"))
                continue
            yield number, row, len(raw)


_COLUMNS = {
    "answers": ("case_id", "attempt", "seq", "answer_model", "answer", "answer_temperature", "reasoning_effort",
                "started_at", "finished_at", "error"),
    "judgments": ("case_id", "judge_model", "attempt", "answer_attempt", "seq", "judge_temperature", "started_at",
                  "finished_at", "elapsed_seconds", "reported_score", "reported_components"),
    "decisions": ("case_id", "judge_model", "item_id", "matched", "judgment_attempt"),
}


def _columns(table: str, rows: list[tuple]) -> dict[str, list]:
    names = _COLUMNS[table]
    return dict(zip(names, map(list, zip(*rows)))) if rows else {c: [] for c in names}


class FileRows:
    """One file's rows as they stream by: checked in file order, counted, and (while the file is still
    importable) buffered as store rows until ``take`` hands a chunk over."""

    def __init__(self, path: Path, run_id: str, checker: RowChecker):
        self.path, self.run_id, self.checker = path, run_id, checker
        self.parse_problems, self.check_problems = Problems(), Problems()
        self.seen: dict[str, Any] = {}  # answer_model, judge_model, protocol_version of earlier rows
        self.rows = self.kept = self.error_rows = 0
        self.completed: set[str] = set()
        self.efforts: set[Any] = set()  # answer_reasoning_effort values of scored rows (two tell "mixed")
        self.attempts: dict[str, int] = {}
        self.judge_attempts: dict[str, int] = {}
        self.disagreements: list[tuple[int, str, float, float]] = []
        self._unchecked: list[tuple] = []  # taken rows whose scores check_scores has not compared yet
        self.buffering = True  # False: only checking (the run cannot be written; errors are still found)
        self._clear()

    def _clear(self) -> None:
        self.buffered_bytes = 0
        self._answers: list[tuple] = []  # one tuple per row, in the order of _COLUMNS (transposed by take)
        self._judgments: list[tuple] = []
        self._decisions: dict[str, list] = {c: [] for c in _COLUMNS["decisions"]}
        self._lines: list[int] = []  # per decision: its row's line (for the disagreement check)
        self._scores: list[tuple[int, str, float]] = []  # per scored row: line, case, the file's score

    @property
    def failed(self) -> bool:
        return bool(self.parse_problems.count or self.check_problems.count)

    def add(self, number: int, row: dict[str, Any], size: int) -> None:
        self.rows += 1
        found: list[Problem] = []
        known = self.checker.check(f"{self.path}:{number}", row, self.seen, found)
        for problem in found:
            self.check_problems.add(problem)
        if not known:
            return
        self.kept += 1
        if self.failed:  # the file will be refused: only its problems count from here on
            return
        case_id = row["case_id"]
        success = "score" in row and not row.get("error")
        if row.get("error"):
            self.error_rows += 1
        if "score" in row and len(self.efforts) < 2:
            self.efforts.add(row.get("answer_reasoning_effort"))
        if success:
            self.completed.add(case_id)
        if not self.buffering:
            return
        self.buffered_bytes += size
        attempt = self.attempts[case_id] = self.attempts.get(case_id, 0) + 1
        self._answers.append((case_id, attempt, number, row.get("answer_model"), row.get("answer") if success else None,
                              row.get("answer_temperature"), row.get("answer_reasoning_effort"), row.get("started_at"),
                              row.get("finished_at"), None if success else str(row.get("error"))))
        if not success:
            return
        j_attempt = self.judge_attempts[case_id] = self.judge_attempts.get(case_id, 0) + 1
        judge = row.get("judge_model") or ""
        self._judgments.append((case_id, judge, j_attempt, attempt, number, row.get("judge_temperature"),
                                row.get("started_at"), row.get("finished_at"), row.get("elapsed_seconds"),
                                float(row["score"]), json.dumps(row.get("score_components"), ensure_ascii=False)))
        d = self._decisions
        n = len(row["decisions"])
        d["case_id"] += [case_id] * n
        d["judge_model"] += [judge] * n
        d["item_id"] += [dec["item_id"] for dec in row["decisions"]]
        d["matched"] += [dec["matched"] for dec in row["decisions"]]
        d["judgment_attempt"] += [j_attempt] * n
        self._lines += [number] * n
        self._scores.append((number, case_id, float(row["score"])))

    def take(self) -> dict[str, Any]:
        """The buffered rows as Arrow tables of the run tables, and an empty buffer. Their scores wait for
        ``check_scores`` (done for many files at once: one scoring call instead of one per file)."""
        out = {}
        for table, cols in (("answers", _columns("answers", self._answers)),
                            ("judgments", _columns("judgments", self._judgments)), ("decisions", self._decisions)):
            size = len(cols["case_id"])
            out[table] = to_arrow(table, {**cols, "run_id": [self.run_id] * size, "judge_pass": [1] * size})
        if self._scores:
            self._unchecked.append((self._lines, out["decisions"].select(["case_id", "item_id", "matched"]),
                                    self._scores))
        self._clear()
        return out

    def drop(self) -> None:
        """Forget the buffered rows (the run cannot be written: the file is only being checked)."""
        self.buffering = False
        self._clear()

    def finish(self, dataset_text: str) -> None:
        """Raise the file's problems, if any (lines that are not JSON first, as a whole-file read found them
        first; then row problems; then a file with no row of the dataset)."""
        if self.parse_problems.count:
            raise self.parse_problems.error()
        if self.check_problems.count:
            raise self.check_problems.error()
        if not self.rows:
            raise ImportError_([Problem(str(self.path), "content", "empty file: no result rows")])
        if not self.kept:
            raise ImportError_([Problem(str(self.path), "case_id", f"no row is a case of the dataset {dataset_text}; "
                                                                   "pass the --dataset these results were graded on")])


def check_scores(files: list[FileRows], rubric_items: pl.DataFrame) -> None:
    """Compare the score each taken row of these files records with the one the rubric gives (the project's
    scoring), adding every difference to its file's ``disagreements`` (warnings, in line order). One
    scoring call for all of them; a row is keyed by its file's place in ``files`` and its line."""
    frames = [pl.from_arrow(decisions).with_columns(run_id=pl.Series(lines, dtype=pl.Int64) + (k << 32))
              for k, rows in enumerate(files) for lines, decisions, _ in rows._unchecked]
    if not frames:
        return
    frame = pl.concat(frames).with_columns(judge_model=pl.lit(""), judge_pass=pl.lit(1, dtype=pl.Int32))
    scores = pass_scores(frame, rubric_items)
    recomputed = dict(zip(zip(scores["run_id"].to_list(), scores["case_id"].to_list()), scores["score"].to_list()))
    for k, rows in enumerate(files):
        for *_, scored in rows._unchecked:
            for number, case_id, score in scored:
                got = recomputed.get(((k << 32) | number, case_id))
                if got is not None and score != got:
                    rows.disagreements.append((number, case_id, score, got))
        rows._unchecked = []
