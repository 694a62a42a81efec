"""``bedside sql``: derived relations always exist; bad SQL and a missing store are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.cli import main
from toolkit.store import Store


def test_derived_relations_exist_in_an_empty_store(tmp_path: Path, capsys, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    for name in ("case_scores", "pass_scores", "benchmark_scores", "run_summary"):
        assert main(["sql", f"select count(*) as n from {name}", "--store", str(store.root), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == [{"n": 0}]
    assert main(["sql", "select count(*) as n from rubric_items", "--store", str(store.root), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": sample_dataset.rubric_items.height}]


def test_bad_sql_and_missing_store(tmp_path: Path, capsys, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    assert main(["sql", "selec 1", "--store", str(store.root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bedside: error: SQL: Parser Error")
    assert main(["sql", "select * from nope", "--store", str(store.root)]) == 1
    assert "Table with name nope does not exist" in capsys.readouterr().err
    assert main(["sql", "select 1", "--store", str(tmp_path / "missing")]) == 1
    assert "no store here" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_pass_scores_use_the_latest_valid_reply(tmp_path: Path, capsys, sample_dataset) -> None:
    # A reference file can hold two successful rows for a case: the last one wins everywhere.
    from tests import reference_model as rm
    from toolkit.reference import import_reference

    rows = [r for r in rm.make_rows(list(sample_dataset.raw_cases), seed=3, error_rate=0) if "score" in r]
    assert len({r["case_id"] for r in rows}) < len(rows)  # make_rows repeats a few successes
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store.open(tmp_path / "st")
    import_reference(store, path, sample_dataset, "r")
    last = {r["case_id"]: r["score"] for r in rows}
    assert main(["sql", "select case_id, score from pass_scores", "--store", str(store.root), "--format", "json"]) == 0
    got = {r["case_id"]: r["score"] for r in json.loads(capsys.readouterr().out)}
    assert got == last
