"""Byte-exact interop: a result file written by the reference's code path (tests/reference_model.py)
comes back out of ``bedside export`` byte for byte, its ``.summary.json`` too."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests import reference_model as rm
from toolkit.cli import main
from toolkit.reference import export_reference, import_reference
from toolkit.store import Store

SAMPLES = 10_000  # the reference's own setting: the summary file must match at the default


def reference_file(dataset, path: Path, seed: int, error_rate: float = 0.2) -> Path:
    """A reference result file and its summary: successes, errors, retries, a case judged twice, cases where
    nothing matched (points and F1 rubrics), non-ASCII answers; written by the reference model's writer."""
    rows = rm.make_rows(list(dataset.raw_cases), seed=seed, error_rate=error_rate)
    rng = random.Random(seed)
    by_id = {c["case_id"]: c for c in dataset.raw_cases}
    methods_done: set[str] = set()
    for i, row in enumerate(rows):
        if "score" not in row:
            continue
        method = row["grading_method"]
        if method not in methods_done or rng.random() < 0.05:
            rows[i] = rm.nothing_matched(by_id[row["case_id"]], row)
            methods_done.add(method)
        if rng.random() < 0.1:
            rows[i] = {**rows[i], "answer": "Dose ≥ 5 µg/kg — «café» 肺炎 \u2028 \"quoted\"\n\ttab"}
    rm.write_rows(path, rows)
    rm.write_summary(path, rm.summarize(rows, SAMPLES, 42, {c["case_id"] for c in dataset.raw_cases},
                                        dataset.sha256))
    return path


@pytest.mark.parametrize("seed", [11, 12])
def test_export_of_an_imported_file_is_byte_identical(seed: int, tmp_path: Path, store: Store,
                                                      public_dataset) -> None:
    source = reference_file(public_dataset, tmp_path / "ref.jsonl", seed)
    text = source.read_text(encoding="utf-8")
    assert '"matched_signed_points": 0,' in text and '"precision_weighted": null' in text  # the cases exist
    assert '"error": "RuntimeError' in text and "µg" in text
    import_reference(store, source, public_dataset, "r")
    out, summary = export_reference(store, "r", tmp_path / "out" / "ref.jsonl")
    assert out.read_bytes() == source.read_bytes()
    assert summary.read_bytes() == Path(rm.summary_path(source)).read_bytes()


def test_cli_export_is_byte_identical(tmp_path: Path, shared_bench: Path, public_dataset, capsys) -> None:
    source = reference_file(public_dataset, tmp_path / "model-a.jsonl", seed=13, error_rate=0.05)
    st = str(tmp_path / "st")
    assert main(["import", str(source), "--store", st, "--dataset", str(shared_bench)]) == 0
    out = tmp_path / "again" / "model-a.jsonl"
    assert main(["export", "--run", "model-a", "--out", str(out), "--store", st]) == 0
    capsys.readouterr()
    assert out.read_bytes() == source.read_bytes()
    assert (tmp_path / "again" / "model-a.summary.json").read_bytes() == \
        (tmp_path / "model-a.summary.json").read_bytes()


def test_only_errors_and_all_cases_unmatched(tmp_path: Path, store: Store, public_dataset) -> None:
    cases = list(public_dataset.raw_cases[:12])
    rows = [rm.nothing_matched(c, r) if "score" in r else r
            for r in rm.make_rows(cases, seed=14, error_rate=0.3)
            for c in cases if c["case_id"] == r["case_id"]]
    source = tmp_path / "zero.jsonl"
    rm.write_rows(source, rows)
    rm.write_summary(source, rm.summarize(rows, SAMPLES, 42, {c["case_id"] for c in public_dataset.raw_cases},
                                          public_dataset.sha256))
    import_reference(store, source, public_dataset, "z")
    out, summary = export_reference(store, "z", tmp_path / "z-out.jsonl")
    assert out.read_bytes() == source.read_bytes()
    assert json.loads(summary.read_text()) == json.loads(Path(rm.summary_path(source)).read_text())
    assert summary.read_bytes() == Path(rm.summary_path(source)).read_bytes()


def test_collected_rows_are_typed_like_the_reference(tmp_path: Path, store: Store, public_dataset) -> None:
    """A collected run (no recorded numbers): every exported score and score_components is the JSON text the
    reference's scoring writes for those decisions, the integer 0 where a points case matched nothing."""
    import polars as pl

    from tests.analysis_sim import simulate_decisions, write_rows

    decisions = simulate_decisions(public_dataset, "c", skill=-1.5, seed=3, passes=2)
    # Some cases where no item matched (points and F1 rubrics alike).
    nothing = public_dataset.cases.group_by("benchmark").agg(pl.col("case_id").first())["case_id"].to_list()
    decisions = decisions.with_columns(matched=pl.col("matched") & ~pl.col("case_id").is_in(nothing))
    write_rows(store, public_dataset, "c", decisions)
    out, _ = export_reference(store, "c", tmp_path / "c.jsonl")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(public_dataset.raw_cases)
    for row in rows:
        case = public_dataset.case(row["case_id"])
        score, components = rm.score_case(case, {d["item_id"]: d["matched"] for d in row["decisions"]})
        assert json.dumps(row["score_components"]) == json.dumps(components), row["case_id"]
        assert json.dumps(row["score"]) == json.dumps(score)
    assert sum('"matched_signed_points": 0,' in line for line in out.read_text().splitlines()) >= 5


def test_export_refuses_an_out_that_is_not_a_regular_file(tmp_path: Path, demo_store: Path, capsys) -> None:
    import os
    import stat

    # the demo's runs have three answer samples: --out pipe.jsonl writes pipe.sample0.jsonl, ...
    fifo, folder = tmp_path / "pipe.sample0.jsonl", tmp_path / "folder.jsonl"
    os.mkfifo(fifo)
    folder.mkdir()
    code = main(["export", "--run", "sim/strong", "--out", str(tmp_path / "pipe.jsonl"), "--store", str(demo_store)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and f"{fifo}: --out: exists and is not a regular file" in err
    assert main(["export", "--run", "sim/strong", "--out", str(folder), "--store", str(demo_store)]) == 2
    assert "is a directory" in capsys.readouterr().err  # click's own check of the option
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and folder.is_dir()  # left as they were
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.jsonl", "pipe.sample0.jsonl"]  # nothing written beside
