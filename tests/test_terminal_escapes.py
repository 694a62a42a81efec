"""Text from files and providers never reaches the terminal raw: a run id, answer or judge model, item text,
provider error or file name holding terminal controls (ESC sequences, BEL, C1, DEL, bidi overrides) is
printed with those characters as escapes (``\\x1b``), in tables and messages, on stdout and stderr, through
real processes whose output is a pipe. JSON stays JSON that decodes to the same values."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.collect_support import bedside
from tests.test_cli_process import bedside_process
from toolkit.reference import sample_path

PAYLOAD = "\x1b[2J\x1b]0;PWNED\x07\x9b31m\x7f\u202e"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
RUN_A, RUN_B = f"run{PAYLOAD}a", f"run{PAYLOAD}b"
SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


@pytest.fixture(scope="module")
def evil(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A store of two runs imported from files whose ids, models, one error and every item text carry
    the payload (the dataset is a copy of the sample with the payload in each rubric item's text)."""
    root = tmp_path_factory.mktemp("evil")
    dataset = root / "dataset"
    shutil.copytree(SAMPLE, dataset)
    for case_file in dataset.glob("data/*/cases/*.json"):
        case = json.loads(case_file.read_text(encoding="utf-8"))
        for item in case["rubric_items"]:
            item["text"] = f"{item['text'][:20]}{PAYLOAD}"
        case_file.write_text(json.dumps(case), encoding="utf-8")
    store = root / "store"
    for source, run_id in (("sim/strong", RUN_A), ("sim/weak", RUN_B)):
        code, _, err = bedside("export", "--run", source, "--out", root / "export.jsonl", "--store", demo_store)
        assert code == 0, err
        exported = sample_path(root / "export.jsonl", 0)  # the demo's runs have three answer samples: one file each
        rows = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
        for row in rows:
            row["answer_model"], row["judge_model"] = f"model{PAYLOAD}", f"judge{PAYLOAD}"
        failed = {k: rows[0][k] for k in ("protocol_version", "case_id", "benchmark", "grading_method",
                                          "answer_model", "judge_model", "finished_at")}
        rows[0] = {**failed, "error": f"RuntimeError: HTTP 500 {PAYLOAD}"}  # its case failed
        exported.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        Path(f"{exported}".removesuffix(".jsonl") + ".summary.json").unlink()
        # New run ids may not hold controls (toolkit.store.paths.new_run_id); a store written before that rule
        # may, and is still read: such a store is made here with the rule switched off.
        with pytest.MonkeyPatch.context() as patch:
            for module in ("toolkit.store.core", "toolkit.store.transaction"):
                patch.setattr(f"{module}.new_run_id", lambda run_id, what="run id": run_id)
            code, _, err = bedside("import", exported, "--run-id", run_id, "--store", store, "--dataset", dataset)
        assert code == 0, err
    return {"store": store, "dataset": dataset, "root": root}


def assert_safe(done, *, code: int = 0) -> str:
    assert done.returncode == code, done.stderr
    for stream in (done.stdout, done.stderr):
        raw = sorted(set(RAW.findall(stream)))
        assert not raw, raw
    both = done.stdout + done.stderr
    assert "\\x1b" in both  # the payload is shown as escapes, not dropped
    return both


@pytest.mark.parametrize("command", [
    ["runs"], ["compare", "--all", "--samples", "200"], ["items", "--all"], ["harms", "--all", "--samples", "200"],
    ["summary", "--all", "--samples", "200"], ["agreement", "--all", "--samples", "200"],
], ids=lambda c: c[0])
def test_tables_and_notes_show_controls_as_escapes(evil: dict[str, Path], command: list[str]) -> None:
    # agreement: each run has one judge, so the command's answer is its error line naming the runs.
    done = bedside_process([*command, "--store", str(evil["store"])])
    shown = assert_safe(done, code=1 if command[0] == "agreement" else 0)
    assert "PWNED" in shown and "\\u202e" in shown


def test_the_runs_listing_shows_a_provider_error_as_escapes(evil: dict[str, Path]) -> None:
    shown = assert_safe(bedside_process(["runs", "--store", str(evil["store"])]))
    assert "HTTP 500 \\x1b[2J" in shown


@pytest.mark.parametrize("args", [
    ["compare", "--run", f"none{PAYLOAD}"],
    ["items", "--all", "--benchmark", f"none{PAYLOAD}"],
    ["runs", "rename", f"none{PAYLOAD}", "x"],
], ids=["unknown-run", "unknown-benchmark", "rename"])
def test_error_messages_show_controls_as_escapes(evil: dict[str, Path], args: list[str]) -> None:
    assert_safe(bedside_process([*args, "--store", str(evil["store"])]), code=1)


def test_file_names_in_errors_show_controls_as_escapes(evil: dict[str, Path]) -> None:
    bad = evil["root"] / f"result{PAYLOAD}.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    assert_safe(bedside_process(["audit", str(bad), "--dataset", str(evil["dataset"])]), code=1)
    assert_safe(bedside_process(["dataset", "info", "--dataset", str(evil["root"] / f"none{PAYLOAD}")]), code=1)


def test_json_stays_json_without_raw_controls(evil: dict[str, Path]) -> None:
    for command in (["runs", "--json"], ["compare", "--all", "--samples", "200", "--format", "json"]):
        done = bedside_process([*command, "--store", str(evil["store"])])
        assert done.returncode == 0, done.stderr
        assert not RAW.findall(done.stdout)
        loaded = json.loads(done.stdout)
        rows = loaded if command[0] == "runs" else loaded["leaderboard"]
        assert {r["run_id"] for r in rows} == {RUN_A, RUN_B}  # the values are whole
