"""Reference-runner interop: import its append-only JSONL result files, export ours in its format."""

from __future__ import annotations

import datetime as dt
import glob
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from toolkit import protocol
from toolkit.dataset import Dataset, Problem
from toolkit.inputs import RESULT_FILE_LIMIT, InputError, decode_utf8, open_regular, parse_json, shorten
from toolkit.scoring import pass_scores, reference_components
from toolkit.selection import JudgeSelection, read_runs, select_judgments
from toolkit.store import Store, StoreError
from toolkit.summary import SummaryOptions, json_number, summarize_data


class ImportError_(ValueError):
    """A result file that cannot be imported; nothing was written."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")


@dataclass(frozen=True)
class Disagreement:
    line: int
    case_id: str
    file_score: float
    recomputed: float


@dataclass(frozen=True)
class ImportReport:
    run_id: str
    rows: int
    completed_cases: int
    error_rows: int
    skipped_rows: int  # rows of cases outside the dataset (the reference ignores them too)
    disagreements: list[Disagreement] = field(default_factory=list)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def read_result_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of a reference JSONL file; ImportError_ on unreadable content. Only a regular
    file of at most RESULT_FILE_LIMIT bytes is read; every value must be one a table can hold
    (``toolkit.inputs.parse_json``: finite numbers, 64-bit integers, bounded nesting, UTF-8 text)."""
    try:
        with open_regular(path, RESULT_FILE_LIMIT) as handle:
            text = decode_utf8(handle.read(), str(path))
    except InputError as error:
        raise ImportError_([Problem(error.file, error.field, error.message)]) from None
    except OSError as error:
        raise ImportError_([Problem(str(path), "file", error.strerror or str(error))]) from None
    rows, problems = [], []
    # Lines end at LF only (as the runner reads its file): str.splitlines() would also break at U+2028,
    # U+0085 and others, which json.dumps(ensure_ascii=False) leaves raw inside answer strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{path}:{number}", position="column {column}", invalid="line is not JSON")
        except InputError as error:
            problems.append(Problem(error.file, error.field, error.message))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(f"{path}:{number}", "row", "must be a JSON object"))
            continue
        rows.append((number, row))
    if not rows and not problems:
        problems.append(Problem(str(path), "content", "empty file: no result rows"))
    if problems:
        raise ImportError_(problems)
    return rows


def _check_row(where: str, row: dict, dataset: Dataset, seen: dict[str, Any], problems: list[Problem]) -> bool:
    """Validate one row; False when it is skipped (case outside the dataset)."""
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
            bad(key, f"{_shown(value)} but earlier rows have {_shown(seen[key])}; "
                     f"the file mixes {key.replace('_', ' ')}s")
    benchmark = row.get("benchmark")
    if benchmark is not None and benchmark not in dataset.benchmarks:
        bad("benchmark", f"unknown benchmark {_shown(benchmark)}")
        return True
    try:
        case = dataset.case(case_id)
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
    _check_decisions(where, row.get("decisions"), case, bad)
    return True


# Fields a row may carry, by the type the store keeps them as; null is always allowed.
_TEXT_FIELDS = ("protocol_version", "benchmark", "grading_method", "answer_model", "judge_model",
                "answer_reasoning_effort")
_TIME_FIELDS = ("started_at", "finished_at")
_NUMBER_FIELDS = ("answer_temperature", "judge_temperature", "elapsed_seconds")  # non-negative


def _check_types(row: dict, bad) -> bool:
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


def _check_decisions(where: str, decisions: Any, case: dict, bad) -> None:
    if not isinstance(decisions, list):
        bad("decisions", "missing or not a list")
        return
    rubric = {item["item_id"]: item["points"] for item in case["rubric_items"]}
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
    missing = [i for i in rubric if i not in seen]
    if missing:
        bad("decisions", f"no decision for {len(missing)} rubric item(s), first {missing[0]}")


def import_reference(store: Store, path: str | Path, dataset: Dataset, run_id: str | None = None,
                     replace: bool = False) -> ImportReport:
    """Load a reference result file into the store as one run; all-or-nothing."""
    path = Path(path)
    run_id = run_id or path.stem
    rows = read_result_rows(path)
    problems: list[Problem] = []
    seen: dict[str, Any] = {}
    kept = [(n, r) for n, r in rows if _check_row(f"{path}:{n}", r, dataset, seen, problems)]
    if problems:
        raise ImportError_(problems)
    if not kept:
        raise ImportError_([Problem(str(path), "case_id", f"no row is a case of the dataset {dataset.source} "
                                                          f"(sha256 {dataset.sha256[:12]}); pass the --dataset these results were graded on")])
    with store.lock(run_id):  # a second writer of this run (import, run, judge, rm) is refused
        if store.has_run(run_id) and not replace:
            raise StoreError(f"{store.root}: run {run_id!r} exists (choose another --run-id or pass --replace)")
        tables = _tables(run_id, kept)
        disagreements = _disagreements(tables["_all_decisions"], kept, dataset)
        answer_efforts = {r.get("answer_reasoning_effort") for _, r in kept if "score" in r}
        run_row = {
            "run_id": run_id, "answer_model": seen.get("answer_model"), "judge_model": seen.get("judge_model"),
            "protocol_version": protocol.PROTOCOL_VERSION, "dataset_sha256": dataset.sha256, "source": "imported",
            "source_file": str(path),
            "answer_reasoning_effort": answer_efforts.pop() if len(answer_efforts) == 1 else None,
            "created_at": now_iso(), "settings": json.dumps({"rows": len(rows), "skipped_rows": len(rows) - len(kept)}),
        }
        step = {"at": run_row["created_at"], "kind": "import", "source_file": str(path), "replace": replace,
                "settings": json.loads(run_row["settings"])}
        store.write_dataset(dataset)
        # One transaction: the data rows, then the runs commit that makes them the run (a replace swaps
        # the old rows out in that same commit; a failure before it leaves the old run as it was).
        store.commit_run(run_id, {t: tables[t] for t in ("answers", "judgments", "decisions")}, run_row,
                         step=step, replace=replace)
    completed = len({r["case_id"] for _, r in kept if "score" in r and not r.get("error")})
    return ImportReport(run_id, len(rows), completed, sum(1 for _, r in kept if r.get("error")),
                        len(rows) - len(kept), disagreements)


@dataclass(frozen=True)
class ImportFailure:
    path: Path
    message: str  # one line, starting with the file's path


def result_files(args: list[str]) -> list[Path]:
    """The files a bulk import reads: a directory gives its *.jsonl (sorted; a *.summary.json is not a
    result file), a pattern that is not itself a file is expanded here (quoted, the shell left it)."""
    files: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
            what = "no *.jsonl result file in this directory"
        elif not path.exists() and any(c in arg for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(arg) if not p.endswith(".summary.json") and Path(p).is_file())
            what = "no result file matches this pattern"
        else:
            found, what = [path], ""
        if not found:
            raise ImportError_([Problem(arg, "file", what)])
        files += found
    return files


def import_many(store: Store, paths: list[str | Path], dataset: Dataset, replace: bool = False,
                run_id: str | None = None) -> list[ImportReport | ImportFailure]:
    """One import (one store commit) per file, in order; a bad file becomes an ImportFailure and the
    others go on (their commits stand). ``run_id`` names the run of a single file only."""
    if run_id is not None and len(paths) > 1:
        raise ValueError(f"--run-id: names one run but {len(paths)} files were given (drop it: each run is named "
                         "after its file)")
    results: list[ImportReport | ImportFailure] = []
    for path in map(Path, paths):
        try:
            results.append(import_reference(store, path, dataset, run_id, replace))
        except (ValueError, OSError, StoreError) as error:  # ImportError_ is a ValueError
            line = (str(error).splitlines() or [type(error).__name__])[0]
            results.append(ImportFailure(path, line if line.startswith(str(path)) else f"{path}: {line}"))
    return results


def _tables(run_id: str, kept: list[tuple[int, dict]]) -> dict[str, Any]:
    answers, judgments, decisions, all_decisions = [], [], [], []
    attempts: dict[str, int] = {}
    judge_attempts: dict[str, int] = {}
    for number, row in kept:
        case_id = row["case_id"]
        attempt = attempts[case_id] = attempts.get(case_id, 0) + 1
        success = "score" in row and not row.get("error")
        answers.append({
            "run_id": run_id, "case_id": case_id, "attempt": attempt, "seq": number,
            "answer_model": row.get("answer_model"), "answer": row.get("answer") if success else None,
            "answer_temperature": row.get("answer_temperature"), "reasoning_effort": row.get("answer_reasoning_effort"),
            "started_at": row.get("started_at"), "finished_at": row.get("finished_at"),
            "error": None if success else str(row.get("error")),
        })
        if not success:
            continue
        j_attempt = judge_attempts[case_id] = judge_attempts.get(case_id, 0) + 1
        judgments.append({
            "run_id": run_id, "case_id": case_id, "judge_model": row.get("judge_model") or "", "judge_pass": 1,
            "attempt": j_attempt, "answer_attempt": attempt, "seq": number,
            "judge_temperature": row.get("judge_temperature"), "started_at": row.get("started_at"),
            "finished_at": row.get("finished_at"), "elapsed_seconds": row.get("elapsed_seconds"),
            "reported_score": float(row["score"]),
            "reported_components": json.dumps(row.get("score_components"), ensure_ascii=False),
        })
        for dec in row["decisions"]:
            all_decisions.append({"run_id": str(number), "case_id": case_id, "judge_model": "", "judge_pass": 1,
                                  "item_id": dec["item_id"], "matched": dec["matched"]})
            decisions.append({"run_id": run_id, "case_id": case_id, "judge_model": row.get("judge_model") or "",
                              "judge_pass": 1, "item_id": dec["item_id"], "matched": dec["matched"],
                              "judgment_attempt": j_attempt})
    return {"answers": answers, "judgments": judgments, "decisions": decisions, "_all_decisions": all_decisions}


def _disagreements(all_decisions: list[dict], kept: list[tuple[int, dict]], dataset: Dataset) -> list[Disagreement]:
    if not all_decisions:
        return []
    scores = pass_scores(pl.DataFrame(all_decisions, schema_overrides={"judge_pass": pl.Int32}), dataset.rubric_items)
    recomputed = {(int(r), c): s for r, c, s in scores.select("run_id", "case_id", "score").iter_rows()}
    out = []
    for number, row in kept:
        key = (number, row["case_id"])
        if key in recomputed and float(row["score"]) != recomputed[key]:
            out.append(Disagreement(number, row["case_id"], float(row["score"]), recomputed[key]))
    return out


# -- export ----------------------------------------------------------------

def _score_fields(score: dict, judgment: dict) -> dict[str, Any]:
    """``score`` and ``score_components`` of an exported row, typed as the reference types them.

    An imported row keeps the numbers its source file recorded (as the reference summary does; the
    import warned about any the rubric does not give), in the file's own JSON types, so that an export
    reproduces the file byte for byte. A collected row gets the recomputed components, with the
    reference's integer ``0`` where a points case matched nothing (its sum over no item starts at 0)."""
    recorded = json.loads(judgment.get("reported_components") or "null")
    if judgment.get("reported_score") is not None and isinstance(recorded, dict):
        return {"score": judgment["reported_score"], "score_components": recorded}
    components = reference_components(score)
    if score["grading_method"] == protocol.POINTS_RUBRIC and score["n_matched"] == 0:
        components["matched_signed_points"] = 0
    return {"score": score["score"], "score_components": components}


def export_reference(store: Store, run_id: str, out: str | Path,
                     selection: JudgeSelection = JudgeSelection(passes=(1,))) -> tuple[Path, Path]:
    """Write a run as reference-format rows, in completion order: a success row for every valid judge
    reply of the selected judge pass, an error row for every attempt that failed; plus
    ``<out>.summary.json``. The reference runner reading the file gets the summary we print."""
    out = Path(out)
    data = read_runs(store, [run_id])
    judgments, _ = select_judgments(data, selection)
    run = data.runs.row(0, named=True)
    sha = run["dataset_sha256"]
    cases = {c["case_id"]: c for c in data.cases.filter(pl.col("dataset_sha256") == sha).iter_rows(named=True)}
    items = data.rubric_items.filter(pl.col("dataset_sha256") == sha)
    ok = judgments.filter(pl.col("error").is_null() & pl.col("case_id").is_in(list(cases)))
    every_reply = data.decisions.join(
        ok.select("run_id", "case_id", "judge_model", "judge_pass", pl.col("attempt").alias("judgment_attempt")),
        on=["run_id", "case_id", "judge_model", "judge_pass", "judgment_attempt"], how="semi")
    scores = {(r["case_id"], r["judgment_attempt"]): r for r in
              pass_scores(every_reply, items, extra_key=("judgment_attempt",)).iter_rows(named=True)}
    listed = (every_reply.join(items.select("case_id", "item_id", "item_index", "points"), on=["case_id", "item_id"])
              .sort("item_index").group_by("case_id", "judgment_attempt")
              .agg(pl.struct("item_id", "points", "matched").alias("decisions")))
    decided = {(c, a): d for c, a, d in listed.iter_rows()}
    answers = {(r["case_id"], r["attempt"]): r for r in data.answers.iter_rows(named=True)}
    lines: list[tuple[int, int, dict]] = []
    for judgment in ok.iter_rows(named=True):
        case_id, attempt = judgment["case_id"], judgment["attempt"]
        answer, score = answers[(case_id, judgment["answer_attempt"])], scores[(case_id, attempt)]
        lines.append((judgment["seq"], 1, {
            "protocol_version": run["protocol_version"], "case_id": case_id,
            "benchmark": cases[case_id]["benchmark"], "grading_method": cases[case_id]["grading_method"],
            "answer_model": answer["answer_model"], "judge_model": judgment["judge_model"],
            "answer_reasoning_effort": answer["reasoning_effort"],
            "answer_temperature": json_number(answer["answer_temperature"]),
            "judge_temperature": json_number(judgment["judge_temperature"]),
            "started_at": answer["started_at"], "finished_at": judgment["finished_at"],
            "elapsed_seconds": judgment["elapsed_seconds"], "answer": answer["answer"],
            "decisions": [{**d, "points": json_number(d["points"])} for d in decided[(case_id, attempt)]],
            **_score_fields(score, judgment),
        }))
    # A failed judge reply that a re-ask replaced is not a failed attempt; the last reply of an answer is.
    terminal = judgments.filter(pl.col("error").is_not_null()).join(
        judgments.group_by("case_id", "answer_attempt").agg(pl.col("attempt").max().alias("_last")),
        on=["case_id", "answer_attempt"]).filter(pl.col("attempt") == pl.col("_last"))
    failures = pl.concat([
        data.answers.filter(pl.col("error").is_not_null()).select("case_id", "seq", "finished_at", "error"),
        terminal.select("case_id", "seq", "finished_at", "error"),
    ])
    for case_id, seq, finished, error in failures.iter_rows():
        if case_id in cases:
            lines.append((seq, 0, {
                "protocol_version": run["protocol_version"], "case_id": case_id,
                "benchmark": cases[case_id]["benchmark"], "grading_method": cases[case_id]["grading_method"],
                "answer_model": run["answer_model"], "judge_model": run["judge_model"],
                "finished_at": finished, "error": error[: protocol.ERROR_TEXT_LIMIT],
            }))
    lines.sort(key=lambda t: (t[0], t[1]))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for _, _, r in lines), encoding="utf-8")
    tmp.replace(out)
    summary = summarize_data(data, [run_id], SummaryOptions(order="reference", selection=selection))[run_id]
    summary_path = out.with_name(out.name[: -len(".jsonl")] + ".summary.json" if out.name.endswith(".jsonl")
                                 else out.name + ".summary.json")
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return out, summary_path
