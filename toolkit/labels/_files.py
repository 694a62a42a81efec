"""Reading a labels file: a review page's JSON export, or a CSV / JSONL table made elsewhere.

Only the file's own shape is checked here (columns, types, label values), each problem one line naming the
file and the row; whether its runs, cases and items exist is ``toolkit.labels._store``' business.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.inputs import DATASET_FILE_LIMIT, InputError, parse_json, read_text, shorten
from toolkit.store import StoreError
from toolkit.store.paths import new_run_id

LABEL_VALUES = ("met", "not_met", "unsure")
PAGE_FORMAT = "bedside-review-labels 1"
TABLE_REQUIRED = ("reviewer", "run_id", "case_id", "item_id", "label")
TABLE_OPTIONAL = ("sample", "labelled_at")
PAGE_KEYS = {"format", "review_id", "reviewer", "exported_at", "labels"}
PAGE_LABEL_KEYS = ("blind_id", "item_id", "label", "labelled_at")
MAX_PROBLEMS = 20  # lines listed; the rest are counted
_INT32 = 2**31 - 1


class LabelsError(ValueError):
    """A labels file refused: one line per problem (``problems``), ``total`` of them found."""

    def __init__(self, problems: list[str], total: int | None = None):
        self.problems = problems[:MAX_PROBLEMS]
        self.total = len(problems) if total is None else total
        super().__init__(problems[0])


@dataclass
class Parsed:
    """A file's labels as given: ``rows`` with ``where`` (a line or ``labels[i]``) for the problem lines;
    page exports name their review and blind ids, tables their runs, cases and samples directly."""

    file: str
    review_id: str | None
    rows: list[dict] = field(default_factory=list)


def parse_file(path: str | Path) -> Parsed:
    """The labels of ``path`` (.json: a page's export; .csv or .jsonl: a table); LabelsError listing every
    problem of its shape."""
    name = str(path)
    suffix = Path(name).suffix.lower()
    if suffix not in (".json", ".csv", ".jsonl"):
        raise LabelsError([f"{name}: not a labels file: give a .json export of a review page, or a .csv or .jsonl "
                           f"table with columns {', '.join(TABLE_REQUIRED)} (and optional sample)"])
    text = read_text(name, DATASET_FILE_LIMIT)
    parsed = _page(name, text) if suffix == ".json" else _csv(name, text) if suffix == ".csv" else _jsonl(name, text)
    if not parsed.rows:
        raise LabelsError([f"{name}: holds no labels"])
    return parsed


def _text(value: object, where: str, column: str, problems: list[str], optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {column}: {'must be text' if not isinstance(value, str) else 'is empty'}"
                        f"{'' if isinstance(value, str) else f' (got {shorten(repr(value), 40)})'}")
        return None
    return value


def _time(value: object, where: str, problems: list[str]) -> str | None:
    """An optional ISO-8601 time with its UTC offset, as UTC text (the store's times are all UTC)."""
    text = _text(value, where, "labelled_at", problems, optional=True)
    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        problems.append(f"{where}: labelled_at: {shorten(repr(text), 60)} is not an ISO-8601 time with its UTC "
                        "offset (e.g. 2025-03-01T10:00:00Z)")
        return None
    try:
        return moment.astimezone(dt.timezone.utc).isoformat()
    except OverflowError:  # year 1 east of UTC, or 9999 west of it
        problems.append(f"{where}: labelled_at: {shorten(repr(text), 60)} is out of range (in UTC it falls before "
                        "year 1 or after year 9999)")
        return None


def reviewer_name(value: object, where: str, problems: list[str]) -> str | None:
    """A reviewer's name as stored: stripped ("Dr A " and "Dr A" are one reviewer) and checked as a run id
    is (NFC, so two spellings of "Émile" are one reviewer; no control, invisible or bidi character, which
    would make one physician look like two)."""
    text = _text(value, where, "reviewer", problems)
    if text is None:
        return None
    try:
        name = new_run_id(text.strip(), "reviewer")
    except StoreError as error:
        problems.append(f"{where}: {error}")
        return None
    # Fullwidth or styled letters (U+FF21 "Ａ") show as another spelling of one physician's name
    odd = next((ch for ch in name if unicodedata.normalize("NFKC", ch) != ch), None)
    if odd is not None:
        problems.append(f"{where}: reviewer {name!r}: holds a compatibility form (U+{ord(odd):04X}) of "
                        f"{unicodedata.normalize('NFKC', odd)!r}, so one reviewer would look like two; write that")
        return None
    return name


def _label(value: object, where: str, problems: list[str]) -> str | None:
    if value not in LABEL_VALUES:
        problems.append(f"{where}: label: {shorten(repr(value), 40)} is not one of {', '.join(LABEL_VALUES)}")
        return None
    return value  # type: ignore[return-value]


def _sample(value: object, where: str, problems: list[str]) -> int | None:
    if value is None or value == "":
        return 0
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():  # "²" is a digit to isdigit
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT32:
        problems.append(f"{where}: sample: {shorten(repr(value), 40)} is not a whole number >= 0")
        return None
    return value


def _page(name: str, text: str) -> Parsed:
    try:
        value = parse_json(text, name, keys_once=True)
    except InputError as error:
        raise LabelsError([str(error)]) from None
    if not isinstance(value, dict) or value.get("format") != PAGE_FORMAT:
        raise LabelsError([f"{name}: not a review page's export (no \"format\": \"{PAGE_FORMAT}\"); a table of "
                           "labels is read from .csv or .jsonl"])
    problems: list[str] = []
    extra = sorted(set(value) - PAGE_KEYS)
    if extra:
        problems.append(f"{name}: unknown key {shorten(extra[0], 60)!r} (an export holds "
                        f"{', '.join(sorted(PAGE_KEYS))})")
    review_id = _text(value.get("review_id"), name, "review_id", problems)
    reviewer = reviewer_name(value.get("reviewer"), name, problems)
    labels = value.get("labels")
    if not isinstance(labels, list):
        problems.append(f"{name}: labels: must be a list")
        labels = []
    parsed = Parsed(name, review_id)
    for i, entry in enumerate(labels):
        where = f"{name}: labels[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object with {', '.join(PAGE_LABEL_KEYS)}")
            continue
        unknown = sorted(set(entry) - set(PAGE_LABEL_KEYS))
        if unknown:
            problems.append(f"{where}: unknown key {shorten(unknown[0], 60)!r}")
            continue
        row = {"where": where, "reviewer": reviewer,
               "blind_id": _text(entry.get("blind_id"), where, "blind_id", problems),
               "item_id": _text(entry.get("item_id"), where, "item_id", problems),
               "label": _label(entry.get("label"), where, problems),
               "labelled_at": _time(entry.get("labelled_at"), where, problems)}
        parsed.rows.append(row)
    if problems:
        raise LabelsError(problems)
    return parsed


def _columns(names: list[str], where: str) -> str | None:
    """The problem line of a table's columns (a required one missing, one not known), or None."""
    missing = [c for c in TABLE_REQUIRED if c not in names]
    unknown = sorted(set(names) - set(TABLE_REQUIRED) - set(TABLE_OPTIONAL))
    if not missing and not unknown:
        return None
    what = f"missing column {missing[0]!r}" if missing else f"unknown column {shorten(str(unknown[0]), 60)!r}"
    return f"{where}: {what} (columns: {', '.join(TABLE_REQUIRED)}; optional: {', '.join(TABLE_OPTIONAL)})"


def _table_row(record: dict, where: str, problems: list[str]) -> dict | None:
    wrong = _columns(list(record), where)
    if wrong is not None:
        problems.append(wrong)
        return None
    return {"where": where, "reviewer": reviewer_name(record["reviewer"], where, problems),
            "run_id": _text(record["run_id"], where, "run_id", problems),
            "case_id": _text(record["case_id"], where, "case_id", problems),
            "sample": _sample(record.get("sample"), where, problems),
            "item_id": _text(record["item_id"], where, "item_id", problems),
            "label": _label(record["label"], where, problems),
            "labelled_at": _time(record.get("labelled_at") or None, where, problems)}


def _csv(name: str, text: str) -> Parsed:
    if text.startswith("\ufeff"):  # spreadsheets save UTF-8 with a byte order mark
        text = text[1:]
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    problems: list[str] = []
    parsed = Parsed(name, None)
    try:
        header = reader.fieldnames or []
        if not header:
            raise LabelsError([f"{name}: holds no labels"])
        if len(set(header)) < len(header):
            raise LabelsError([f"{name}: line 1: a column is named twice"])
        wrong = _columns(header, f"{name}: line 1")
        if wrong is not None:
            raise LabelsError([wrong])
        for record in reader:
            where = f"{name}: line {reader.line_num}"
            if None in record or any(v is None for v in record.values()):
                problems.append(f"{where}: {len(header)} columns expected")
                continue
            row = _table_row(record, where, problems)
            if row is not None:
                parsed.rows.append(row)
    except csv.Error as error:
        raise LabelsError([f"{name}: line {reader.line_num}: not valid CSV ({error})"]) from None
    if problems:
        raise LabelsError(problems)
    return parsed


def _jsonl(name: str, text: str) -> Parsed:
    problems: list[str] = []
    parsed = Parsed(name, None)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}: line {number}"
        try:
            record = parse_json(line, name, position=f"line {number} column {{column}}", keys_once=True)
        except InputError as error:  # a value's path (a key given twice, say) is found within its line
            problems.append(str(error) if error.field.startswith("line ") else
                            f"{where}: {error.field}: {error.message}")
            continue
        if not isinstance(record, dict):
            problems.append(f"{where}: must be a JSON object")
            continue
        row = _table_row(record, where, problems)
        if row is not None:
            parsed.rows.append(row)
    if problems:
        raise LabelsError(problems)
    return parsed
