"""The rules a reference result row must meet to be imported (or audited): types, models, dataset membership,
decisions against the rubric. Each refusal is a ``Problem`` naming the file:line and the field."""

from __future__ import annotations

import datetime as dt
import weakref
from typing import Any, Callable

from toolkit import protocol
from toolkit.dataset import Dataset, Problem
from toolkit.inputs import shorten

# Fields a row may carry, by the type the store keeps them as; null is always allowed.
_TEXT_FIELDS = ("protocol_version", "benchmark", "grading_method", "answer_model", "judge_model",
                "answer_reasoning_effort")
_TIME_FIELDS = ("started_at", "finished_at")
_NUMBER_FIELDS = ("answer_temperature", "judge_temperature", "elapsed_seconds")  # non-negative


class RowChecker:
    """The checks of one dataset, with what they look up per row prepared once (benchmark names, each
    case's rubric points): a file of 200k rows asks them 200k times."""

    def __init__(self, dataset: Dataset):
        self.dataset = dataset
        self.benchmarks = frozenset(dataset.benchmarks)
        self._rubrics: dict[str, dict[str, Any]] = {}

    def rubric(self, case: dict) -> dict[str, Any]:
        """item_id -> points of a case, in rubric order."""
        found = self._rubrics.get(case["case_id"])
        if found is None:
            found = self._rubrics[case["case_id"]] = {i["item_id"]: i["points"] for i in case["rubric_items"]}
        return found

    def check(self, where: str, row: dict, seen: dict[str, Any], problems: list[Problem]) -> bool:
        """Validate one row (``seen``: the models and protocol earlier rows named); False when it is
        skipped (a case outside the dataset)."""
        def bad(fld: str, msg: str) -> None:
            problems.append(Problem(where, fld, msg))

        case_id = row.get("case_id")
        if not isinstance(case_id, str) or not case_id:
            bad("case_id", "missing or not a string")
            return True
        if not _check_types(row, bad):
            return True
        for key in ("answer_model", "judge_model", "protocol_version"):
            value = row.get(key)
            if value is None:
                continue
            if key == "protocol_version" and value != protocol.PROTOCOL_VERSION:
                bad(key, f"{_shown(value)} is not {protocol.PROTOCOL_VERSION!r}")
            elif seen.setdefault(key, value) != value:
                said = seen.setdefault(f"{key}, mixed in", set())
                if value not in said:  # once per other value: its further rows would say nothing new
                    said.add(value)
                    bad(key, f"{_shown(value)} but earlier rows have {_shown(seen[key])}; "
                             f"the file mixes {key.replace('_', ' ')}s")
        benchmark = row.get("benchmark")
        if benchmark is not None and benchmark not in self.benchmarks:
            bad("benchmark", f"unknown benchmark {_shown(benchmark)}")
            return True
        try:
            case = self.dataset.case(case_id)
        except KeyError:
            return False
        for key in ("benchmark", "grading_method"):
            if row.get(key) is not None and row[key] != case[key]:
                bad(key, f"{_shown(row[key])} but case {case_id} is {case[key]!r} in the dataset")
        is_success = "score" in row and not row.get("error")
        if not is_success:
            if not row.get("error"):
                bad("error", "row has neither a score nor an error")
            return True
        if not isinstance(row.get("answer"), str):
            bad("answer", "missing or not a string")
        if not _is_number(row["score"]):
            bad("score", f"{_kind(row['score'])}, not a number")
        elif not 0 <= row["score"] <= 1:
            bad("score", f"{row['score']!r} is outside [0, 1]")
        _check_decisions(row.get("decisions"), case, self.rubric(case), bad)
        return True


_CHECKERS: "weakref.WeakKeyDictionary[Dataset, RowChecker]" = weakref.WeakKeyDictionary()


def checker(dataset: Dataset) -> RowChecker:
    found = _CHECKERS.get(dataset)
    if found is None:
        found = _CHECKERS[dataset] = RowChecker(dataset)
    return found


def check_row(where: str, row: dict, dataset: Dataset, seen: dict[str, Any], problems: list[Problem]) -> bool:
    """Validate one row; False when it is skipped (case outside the dataset). (``RowChecker.check``.)"""
    return checker(dataset).check(where, row, seen, problems)


def _check_types(row: dict, bad: Callable[[str, str], None]) -> bool:
    """Every stored field of a row has the type of its column (numbers are finite: parse_json);
    False after reporting the first one that does not."""
    for key in _TEXT_FIELDS:
        if row.get(key) is not None and not isinstance(row[key], str):
            bad(key, f"{_kind(row[key])}, but must be a string or null")
            return False
    for key in _TIME_FIELDS:
        value = row.get(key)
        if value is not None and not (isinstance(value, str) and _is_iso_time(value)):
            shown = shorten(repr(value), 60) if isinstance(value, str) else _kind(value)
            bad(key, f"{shown}, but must be ISO-8601 time text (as 2026-01-31T12:00:00+00:00) or null")
            return False
    for key in _NUMBER_FIELDS:
        value = row.get(key)
        if value is not None and not (_is_number(value) and value >= 0):
            bad(key, f"{shorten(repr(value), 60) if _is_number(value) else _kind(value)}, "
                     "but must be a non-negative number or null")
            return False
    return True


def _shown(value: Any) -> str:
    """A value quoted for a message, cut if long (a file can hold a megabyte where a name belongs)."""
    return shorten(repr(value), 80)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_iso_time(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _kind(value: Any) -> str:
    """What a JSON value is, for a message (never the value itself: it may be huge)."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return f"{shorten(repr(value), 60)} ({names.get(type(value), type(value).__name__)})" \
        if isinstance(value, (bool, int, float)) else names.get(type(value), type(value).__name__)


def _check_decisions(decisions: Any, case: dict, rubric: dict[str, Any], bad: Callable[[str, str], None]) -> None:
    if not isinstance(decisions, list):
        bad("decisions", "missing or not a list")
        return
    seen: set[str] = set()
    for i, dec in enumerate(decisions):
        if not isinstance(dec, dict) or not isinstance(dec.get("item_id"), str) or not isinstance(dec.get("matched"), bool):
            bad(f"decisions[{i}]", "needs a string item_id and a boolean matched")
            return
        item_id = dec["item_id"]
        if item_id not in rubric:
            bad(f"decisions[{i}].item_id", f"{_shown(item_id)} is not a rubric item of case {case['case_id']}")
        elif item_id in seen:
            bad(f"decisions[{i}].item_id", f"duplicate decision for {item_id}")
        elif "points" in dec and dec["points"] != rubric[item_id]:
            bad(f"decisions[{i}].points", f"{_shown(dec['points'])} but the rubric gives {rubric[item_id]}")
        seen.add(item_id)
    if not seen.issuperset(rubric):
        missing = [i for i in rubric if i not in seen]
        bad("decisions", f"no decision for {len(missing)} rubric item(s), first {missing[0]}")
