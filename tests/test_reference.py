"""Reference interop: imported files summarise exactly like the reference runner; bad files change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.conftest import snapshot
from toolkit.bootstrap._reference import BootstrapSettings
from toolkit.cli import main
from toolkit.reference import export_reference, import_reference
from toolkit.reference._read import ImportError_
from toolkit.store import Store, StoreError
from toolkit.summary import SummaryOptions, summarize

SAMPLES = 500  # the engine is exact at any size; the CLI test below uses the default 10,000


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _expected(rows: list[dict], ds, samples: int = SAMPLES) -> dict:
    return rm.summarize(rows, samples, 42, {c["case_id"] for c in ds.raw_cases}, ds.sha256)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_summary_equals_the_reference_exactly(seed: int, tmp_path: Path, store: Store, public_dataset) -> None:
    rows = rm.make_rows(list(public_dataset.raw_cases), seed=seed, error_rate=0.15)
    report = import_reference(store, _write(tmp_path / "r.jsonl", rows), public_dataset, "run")
    assert report.disagreements == [] and report.error_rows > 0
    ours = summarize(store, ["run"], SummaryOptions(order="reference", bootstrap=BootstrapSettings(samples=SAMPLES)))
    # json text equality: every float bit-identical, field order identical, NaN written alike
    assert json.dumps(ours["run"]) == json.dumps(_expected(rows, public_dataset))


def test_dataset_order_ignores_completion_order(tmp_path: Path, store: Store, sample_dataset) -> None:
    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=4, error_rate=0.0)
    successes = [r for r in rows if "score" in r]
    last = {r["case_id"]: r for r in successes}
    a = _write(tmp_path / "a.jsonl", list(last.values()))
    b = _write(tmp_path / "b.jsonl", list(reversed(list(last.values()))))
    import_reference(store, a, sample_dataset, "a")
    import_reference(store, b, sample_dataset, "b")
    opts = SummaryOptions(bootstrap=BootstrapSettings(samples=SAMPLES))
    ref = summarize(store, ["a", "b"], SummaryOptions(order="reference", bootstrap=opts.bootstrap))
    assert ref["a"]["overall_ci95"] != ref["b"]["overall_ci95"]  # completion order matters there
    ds = summarize(store, ["a", "b"], SummaryOptions(order="dataset", bootstrap=opts.bootstrap))
    assert ds["a"]["overall_ci95"] == ds["b"]["overall_ci95"]
    assert ds["a"]["benchmarks"] == ds["b"]["benchmarks"]


def test_smaller_files_edge_cases(tmp_path: Path, store: Store, sample_dataset) -> None:
    case = sample_dataset.raw_cases[0]
    only_errors = [{"protocol_version": rm.PROTOCOL, "case_id": case["case_id"], "benchmark": case["benchmark"],
                    "grading_method": case["grading_method"], "answer_model": "m", "judge_model": "j",
                    "finished_at": "2026-01-01T00:00:00+00:00", "error": "RuntimeError: boom"}]
    import_reference(store, _write(tmp_path / "e.jsonl", only_errors), sample_dataset, "e")
    got = summarize(store, ["e"], SummaryOptions(order="reference", bootstrap=BootstrapSettings(samples=10)))["e"]
    assert json.dumps(got) == json.dumps(_expected(only_errors, sample_dataset, 10))
    assert got["completed_cases"] == 0 and got["errors"] == 1


def test_rows_outside_the_dataset_are_skipped_like_the_reference(tmp_path: Path, store: Store, sample_dataset,
                                                                 public_dataset) -> None:
    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=5) + rm.make_rows(
        list(public_dataset.raw_cases[:5]), seed=5, error_rate=0)
    report = import_reference(store, _write(tmp_path / "m.jsonl", rows), sample_dataset, "m")
    assert report.skipped_rows >= 5
    got = summarize(store, ["m"], SummaryOptions(order="reference", bootstrap=BootstrapSettings(samples=SAMPLES)))["m"]
    assert json.dumps(got) == json.dumps(_expected(rows, sample_dataset))


def test_a_file_of_another_dataset_is_refused(tmp_path: Path, store: Store, sample_dataset, public_dataset) -> None:
    rows = rm.make_rows(list(public_dataset.raw_cases[:5]), seed=5, error_rate=0)
    with pytest.raises(ImportError_, match="no row is a case of the dataset"):
        import_reference(store, _write(tmp_path / "other.jsonl", rows), sample_dataset, "other")
    assert not store.root.exists()


def test_disagreeing_scores_are_reported(tmp_path: Path, store: Store, sample_dataset) -> None:
    rows = [r for r in rm.make_rows(list(sample_dataset.raw_cases), seed=6, error_rate=0) if "score" in r]
    rows[0]["score"] = 0.123456
    report = import_reference(store, _write(tmp_path / "d.jsonl", rows), sample_dataset, "d")
    assert [(d.line, d.case_id, d.file_score) for d in report.disagreements] == [(1, rows[0]["case_id"], 0.123456)]
    # The reference order keeps the file's number (as the runner does); the dataset order recomputes.
    ref = summarize(store, ["d"], SummaryOptions(order="reference", bootstrap=BootstrapSettings(samples=10)))["d"]
    assert json.dumps(ref) == json.dumps(_expected(rows, sample_dataset, 10))


def test_export_round_trip(tmp_path: Path, store: Store, public_dataset) -> None:
    rows = rm.make_rows(list(public_dataset.raw_cases), seed=7, error_rate=0.2)
    import_reference(store, _write(tmp_path / "in.jsonl", rows), public_dataset, "x")
    out, summary_path = export_reference(store, "x", tmp_path / "out.jsonl")
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    full = SummaryOptions(order="reference")
    assert json.loads(summary_path.read_text()) == json.loads(json.dumps(_expected(rows, public_dataset, 10_000)))
    assert json.dumps(_expected(exported, public_dataset)) == json.dumps(_expected(rows, public_dataset))
    import_reference(store, out, public_dataset, "y")
    again = summarize(store, ["x", "y"], full)
    assert json.dumps(again["x"]) == json.dumps(again["y"])


# -- bad files: clear error, store untouched ------------------------------------

def _good(sample_dataset) -> list[dict]:
    return [r for r in rm.make_rows(list(sample_dataset.raw_cases), seed=8, error_rate=0) if "score" in r][:6]


def _bad_cases(rows: list[dict]) -> dict[str, tuple[object, str]]:
    def with_row(i: int, **change) -> list[dict]:
        copy = [dict(r) for r in rows]
        copy[i].update(change)
        return copy

    decisions = rows[1]["decisions"]
    return {
        "broken JSON": ('{"case_id": "x", \n', ":1: column"),
        "line not JSON": (json.dumps(rows[0]) + "\nthis is not json\n", ":2: column 1: line is not JSON"),
        "not an object": (json.dumps(rows[0]) + "\n[1, 2]\n", ":2: row: must be a JSON object"),
        "empty file": ("", "empty file"),
        "non-UTF-8": (b'{"case_id": "\xff"}\n', "not UTF-8"),
        "missing field": (with_row(2, case_id=None), ":3: case_id: missing"),
        "mixed answer models": (with_row(3, answer_model="other"), "the file mixes answer models"),
        "mixed judge models": (with_row(3, judge_model="other"), "the file mixes judge models"),
        "other protocol": (with_row(0, protocol_version="v0"), "protocol_version"),
        "unknown benchmark": (with_row(1, benchmark="astrology"), "unknown benchmark 'astrology'"),
        "wrong benchmark": (with_row(1, benchmark="landmark_trials"), ":2: benchmark:"),
        "decision missing": (with_row(1, decisions=decisions[:-1]), "no decision for 1 rubric item"),
        "decision extra": (with_row(1, decisions=decisions + [{"item_id": "zz_0", "points": 1, "matched": True}]),
                           "is not a rubric item"),
        "decision duplicate": (with_row(1, decisions=decisions + decisions[:1]), "duplicate decision"),
        "decision not boolean": (with_row(1, decisions=[{**decisions[0], "matched": "yes"}] + decisions[1:]),
                                 "boolean matched"),
        "decision points": (with_row(1, decisions=[{**decisions[0], "points": 7}] + decisions[1:]),
                            "but the rubric gives"),
        "neither score nor error": ([{k: v for k, v in r.items() if k != "score"} for r in rows],
                                    "neither a score nor an error"),
    }


@pytest.mark.parametrize("name", sorted(_bad_cases([{"decisions": [{"item_id": "i", "matched": True}]}] * 6)))
def test_bad_files_are_refused_and_leave_the_store_untouched(name: str, tmp_path: Path, store: Store,
                                                             sample_dataset, capsys) -> None:
    rows = _good(sample_dataset)
    content, message = _bad_cases(rows)[name]
    path = tmp_path / "bad.jsonl"
    if isinstance(content, list):
        _write(path, content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    import_reference(store, _write(tmp_path / "ok.jsonl", rows), sample_dataset, "existing")
    before = snapshot(store.root)
    with pytest.raises(ImportError_) as error:
        import_reference(store, path, sample_dataset, "new")
    assert message in str(error.value) and str(path) in str(error.value)
    code = main(["import", str(path), "--run-id", "new", "--store", str(store.root)])
    err = capsys.readouterr().err
    assert code != 0 and message in err and err.startswith("bedside: error: ")
    assert snapshot(store.root) == before


def test_existing_run_is_not_overwritten_without_replace(tmp_path: Path, store: Store, sample_dataset) -> None:
    path = _write(tmp_path / "ok.jsonl", _good(sample_dataset))
    import_reference(store, path, sample_dataset, "r")
    before = snapshot(store.root)
    with pytest.raises(StoreError, match="exists"):
        import_reference(store, path, sample_dataset, "r")
    assert snapshot(store.root) == before
    import_reference(store, path, sample_dataset, "r", replace=True)
    assert store.read("runs").height == 1


def test_cli_import_summary_sql_export(tmp_path: Path, shared_bench: Path, public_dataset, capsys) -> None:
    rows = rm.make_rows(list(public_dataset.raw_cases), seed=9)
    path = _write(tmp_path / "accounts-model.jsonl", rows)
    st = str(tmp_path / "st")
    run_id = "accounts/fireworks/models/x"
    assert main(["import", str(path), "--run-id", run_id, "--store", st, "--dataset", str(shared_bench)]) == 0
    capsys.readouterr()
    assert main(["summary", "--run", run_id, "--store", st, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [run_id]
    # bedside's own output names its interval's method; the reference's summary object is the rest, exactly
    assert out[run_id].pop("ci_method") == "percentile bootstrap (reference, 10,000 resamples)"
    assert json.dumps(out[run_id]) == json.dumps(_expected(rows, public_dataset, 10_000))
    assert main(["summary", "--all", "--store", st]) == 0
    assert "OVERALL" in capsys.readouterr().out
    assert main(["sql", "select run_id, completed_cases, errors from run_summary", "--store", st,
                 "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == [{"run_id": run_id, "completed_cases": out[run_id]["completed_cases"], "errors": out[run_id]["errors"]}]
    assert main(["sql", "select benchmark, count(*) n from case_scores group by 1 order by 1", "--store", st,
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("benchmark,n\n")
    assert main(["export", "--run", run_id, "--out", str(tmp_path / "exp.jsonl"), "--store", st]) == 0
    assert json.loads((tmp_path / "exp.summary.json").read_text()) == json.loads(json.dumps(out[run_id]))
    assert main(["summary", "--run", "nope", "--store", st]) == 1
    assert "no run 'nope'" in capsys.readouterr().err
