"""Export a stored run in the reference runner's result format: its JSONL rows and ``<out>.summary.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from toolkit import protocol
from toolkit.scoring import pass_scores, reference_components
from toolkit.selection import JudgeSelection, RunData, read_runs, select_judgments
from toolkit.store import Store
from toolkit.summary import SummaryOptions, json_number, summarize_data


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


def summary_path(out: Path) -> Path:
    """``<out>.summary.json`` beside an export (``.jsonl`` replaced)."""
    return out.with_name(out.name[: -len(".jsonl")] + ".summary.json" if out.name.endswith(".jsonl")
                         else out.name + ".summary.json")


def export_reference(store: Store, run_id: str, out: str | Path,
                     selection: JudgeSelection = JudgeSelection(passes=(1,)),
                     data: RunData | None = None) -> tuple[Path, Path]:
    """Write a run as reference-format rows, in completion order: a success row for every valid judge
    reply of the selected judge pass, an error row for every attempt that failed; plus
    ``<out>.summary.json``. The reference runner reading the file gets the summary we print. ``data``: the
    run's rows, when already read."""
    out = Path(out)
    data = read_runs(store, [run_id]) if data is None else data
    samples = set(data.answers["sample"]) | set(data.judgments["sample"])
    if len(samples) > 1:  # one file holds one answer per case: mixing samples would corrupt it
        raise ValueError(f"run {run_id!r} has {len(samples)} answer samples per case: one reference file holds one; "
                         "export_samples writes one file per sample")
    rows, summary = export_text(data, run_id, out, selection)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(rows, encoding="utf-8")
    tmp.replace(out)
    summary_path(out).write_text(summary, encoding="utf-8")
    return out, summary_path(out)


def export_text(data: RunData, run_id: str, out: Path, selection: JudgeSelection) -> tuple[str, str]:
    """The reference file's text and its summary's, of one answer sample's rows (``data``)."""
    # The file is written beside its name and renamed over it: a device (/dev/null) or a pipe would be
    # replaced by a plain file, a folder cannot be.
    if out.exists() and not out.is_file():
        raise ValueError(f"{out}: --out: exists and is not a regular file (a folder, device or pipe); give a file "
                         "path")
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
    summary = summarize_data(data, [run_id], SummaryOptions(order="reference", selection=selection))[run_id]
    return ("".join(json.dumps(r, ensure_ascii=False) + "\n" for _, _, r in lines),
            json.dumps(summary, indent=2) + "\n")
