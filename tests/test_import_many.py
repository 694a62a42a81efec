"""Bulk import: many result files in one process, one run per file; a bad file names itself and
the other files' runs stand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from toolkit.cli import main
from toolkit.store import Store


def _files(root: Path, sample_dataset) -> dict[str, int]:
    """Three good result files and one bad one in root (plus a summary that is not a result file);
    {run id: rows} of the good ones."""
    root.mkdir()
    counts = {}
    for seed, name in enumerate(["alpha", "beta", "gamma"], start=1):
        rows = rm.make_rows(list(sample_dataset.raw_cases), seed=seed, error_rate=0.1)[: 3 + seed]
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        counts[name] = len(rows)
    (root / "bad.jsonl").write_text('{"case_id": "x"}\nnot json\n')
    (root / "alpha.summary.json").write_text("{}")
    return counts


def _runs(store: Path) -> dict[str, int]:
    """{run id: rows the store says it imported} from the runs table."""
    data = Store.open(store)
    return {run: json.loads(data.run(run)["settings"])["rows"] for run in data.run_ids()}


@pytest.mark.parametrize("how", ["dir", "glob", "list"])
def test_three_good_one_bad(tmp_path: Path, sample_dataset, capsys, how: str) -> None:
    counts = _files(tmp_path / "results", sample_dataset)
    root = tmp_path / "results"
    args = {"dir": [str(root)], "glob": [str(root / "*.jsonl")],
            "list": [str(root / f"{n}.jsonl") for n in ["alpha", "bad", "beta", "gamma"]]}[how]
    store = tmp_path / "store"
    code = main(["import", *args, "--store", str(store)])
    out, err = capsys.readouterr()
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("bedside: error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"bedside: error: {root / 'bad.jsonl'}:"), err
    assert [line.split(":")[0] for line in out.splitlines()] == ["imported alpha", "imported beta", "imported gamma"]
    assert {run: f"{counts[run]} rows" in out for run in counts} == dict.fromkeys(counts, True)
    assert _runs(store) == counts


def test_run_id_with_two_files_is_refused(tmp_path: Path, sample_dataset, capsys) -> None:
    _files(tmp_path / "results", sample_dataset)
    store = tmp_path / "store"
    code = main(["import", str(tmp_path / "results" / "alpha.jsonl"), str(tmp_path / "results" / "beta.jsonl"),
                 "--run-id", "x", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 1 and err.splitlines() == [err.splitlines()[0]] and "--run-id" in err, err
    assert not store.exists() or not Store.open(store).run_ids()


def test_an_existing_run_fails_that_file_only(tmp_path: Path, sample_dataset, capsys) -> None:
    _files(tmp_path / "results", sample_dataset)
    root, store = tmp_path / "results", str(tmp_path / "store")
    assert main(["import", str(root / "beta.jsonl"), "--store", store]) == 0
    capsys.readouterr()
    code = main(["import", str(root / "alpha.jsonl"), str(root / "beta.jsonl"), str(root / "gamma.jsonl"),
                 "--store", store])
    out, err = capsys.readouterr()
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("bedside: error: ")]
    assert errors == [line for line in errors if "beta.jsonl" in line] and len(errors) == 1, err
    assert err.splitlines()[-1] == "bedside: imported 2 of 3 files; 1 not imported (above)", err
    assert "exists" in err and "imported alpha" in out and "imported gamma" in out
    assert set(_runs(Path(store))) == {"alpha", "beta", "gamma"}
    assert main(["import", str(root), "--replace", "--store", store]) == 1  # bad.jsonl still bad
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == ["replaced alpha", "replaced beta", "replaced gamma"]
    assert main(["import", str(root / "beta.jsonl"), "--replace", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("replaced beta: ")
    assert main(["import", str(root / "beta.jsonl"), "--run-id", "delta", "--replace", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("imported delta: ")  # nothing to replace: a new run


@pytest.mark.parametrize("how", ["dir", "glob"])
def test_entries_named_jsonl_that_are_not_files_each_get_their_line(tmp_path: Path, sample_dataset, capsys,
                                                                    how: str) -> None:
    """A broken link, a FIFO and a folder named *.jsonl in the directory are not skipped in silence: each is
    one error line naming it, and the good files' runs stand (exit 1)."""
    import os

    counts = _files(tmp_path / "results", sample_dataset)
    root = tmp_path / "results"
    (root / "bad.jsonl").unlink()
    (root / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    os.mkfifo(root / "pipe.jsonl")
    (root / "folder.jsonl").mkdir()
    arg = str(root) if how == "dir" else str(root / "*.jsonl")
    code = main(["import", arg, "--store", str(tmp_path / "store")])
    out, err = capsys.readouterr()
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("bedside: error: ")]
    assert sorted(line.split(":")[2].strip() for line in errors) == \
        sorted(str(root / n) for n in ("folder.jsonl", "gone.jsonl", "pipe.jsonl")), err
    assert _runs(tmp_path / "store") == counts


def test_a_folder_imported_again_says_once_which_runs_exist_and_tallies(tmp_path: Path, sample_dataset,
                                                                         capsys) -> None:
    # "My folder grew": the runs already stored are one line, not one per file; the new file's run is made.
    counts = _files(tmp_path / "results", sample_dataset)
    root, store = tmp_path / "results", str(tmp_path / "store")
    (root / "bad.jsonl").unlink()
    assert main(["import", str(root), "--store", store]) == 0
    capsys.readouterr()
    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=9, error_rate=0.1)[:5]
    (root / "delta.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["import", str(root), "--store", store])
    out, err = capsys.readouterr()
    assert code == 1 and out.splitlines()[0].startswith("imported delta: "), out
    assert err.splitlines() == [
        f"bedside: error: 3 of the files are of runs already in {store} (alpha.jsonl, beta.jsonl, gamma.jsonl): "
        "pass --replace to replace them",
        "bedside: imported 1 of 4 files; 3 not imported (above)"], err
    assert set(_runs(Path(store))) == {*counts, "delta"}


def test_an_unknown_run_in_a_store_of_many_names_a_few_and_counts_the_rest(tmp_path: Path, sample_dataset,
                                                                            capsys) -> None:
    root = tmp_path / "results"
    root.mkdir()
    for i in range(14):
        rows = rm.make_rows(list(sample_dataset.raw_cases), seed=i, error_rate=0.0)[:3]
        (root / f"m{i:02d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = str(tmp_path / "store")
    assert main(["import", str(root), "--store", store]) == 0
    capsys.readouterr()
    assert main(["summary", "--run", "nope", "--store", store]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"bedside: error: {store}: no run 'nope' (runs: "
                                + ", ".join(f"m{i:02d}" for i in range(10)) + " and 4 more)"], err


@pytest.mark.parametrize("replace", [[], ["--replace"]])
def test_two_files_of_one_run_id_in_one_import_keep_the_first_and_fail_the_second(
        tmp_path: Path, sample_dataset, capsys, replace: list[str]) -> None:
    counts = _files(tmp_path / "a", sample_dataset)
    other = tmp_path / "b"
    other.mkdir()
    (other / "alpha.jsonl").write_bytes((tmp_path / "a" / "beta.jsonl").read_bytes())  # beta's rows, alpha's name
    store = str(tmp_path / "store")
    code = main(["import", str(tmp_path / "a" / "alpha.jsonl"), str(other / "alpha.jsonl"), "--store", store, *replace])
    out, err = capsys.readouterr()
    assert code == 1 and out.splitlines()[0].startswith("imported alpha: ") and len(out.splitlines()) == 1, out
    errors = [line for line in err.splitlines() if line.startswith("bedside: error: ")]
    assert errors == [f"bedside: error: {other / 'alpha.jsonl'}: names run 'alpha', as "
                      f"{tmp_path / 'a' / 'alpha.jsonl'} does in this import: one run per file (import it "
                      "alone, or rename it)"], err
    assert _runs(Path(store)) == {"alpha": counts["alpha"]}


def test_ctrl_c_in_a_folder_import_names_the_runs_it_made_before_its_line(tmp_path: Path, sample_dataset, capsys,
                                                                       monkeypatch) -> None:
    from toolkit.reference import _read

    _files(tmp_path / "results", sample_dataset)
    (tmp_path / "results" / "bad.jsonl").unlink()
    monkeypatch.setattr(_read, "BATCH_FILES", 1)  # each file committed as soon as it is read
    reading = _read._Importer._read

    def read(self, index, path, run_id):
        if path.name == "gamma.jsonl":
            raise KeyboardInterrupt  # Ctrl-C while the third file is read; beta's commit is in flight
        return reading(self, index, path, run_id)

    monkeypatch.setattr(_read._Importer, "_read", read)
    store = tmp_path / "store"
    code = main(["import", str(tmp_path / "results"), "--store", str(store)])
    out, err = capsys.readouterr()
    assert code == 130 and err == "bedside: interrupted\n", err
    assert [line.split(":")[0] for line in out.splitlines()] == ["imported alpha", "imported beta"], out
    assert sorted(_runs(store)) == ["alpha", "beta"]
