"""Choosing many runs on the command line: ``--run`` takes a pattern (``--run 'model-*'``) when no run has that
exact id, and ``--runs-file FILE`` takes ids or patterns one a line. Real processes, a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.test_compare_reads import bedside
from toolkit.dataset import load_dataset

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("selection")
    cases = list(load_dataset(None).raw_cases)
    for i, name in enumerate(("model-b", "model-a", "other", "star*")):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rm.make_rows(cases, seed=i)),
                                             encoding="utf-8")
    done = bedside("import", folder, "--store", folder / "store")
    assert done.returncode == 0, done.stderr
    return folder / "store"


def _summarised(store: Path, *args: object) -> list[str]:
    done = bedside("summary", *args, "--store", store, "--json", "--samples", "200")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_a_pattern_names_the_runs_it_matches_in_store_order(store: Path) -> None:
    order = [r for r in _summarised(store, "--all") if r.startswith("model-")]
    assert sorted(order) == ["model-a", "model-b"]
    assert _summarised(store, "--run", "model-*") == order
    assert _summarised(store, "--run", "other", "--run", "model-?") == ["other", *order]


def test_an_exact_id_wins_over_the_pattern_it_spells(store: Path) -> None:
    assert _summarised(store, "--run", "star*") == ["star*"]


def test_a_pattern_that_matches_nothing_is_one_line(store: Path) -> None:
    done = bedside("compare", "--run", "nothing-*", "--store", store)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "no run id matches the pattern 'nothing-*'" in lines[0]


def test_a_runs_file_names_runs_and_patterns_one_a_line(store: Path, tmp_path: Path) -> None:
    listed = tmp_path / "runs.txt"
    listed.write_text("# the two models\nmodel-*\n\n  other  \nmodel-a\n", encoding="utf-8")
    assert sorted(_summarised(store, "--runs-file", listed)) == ["model-a", "model-b", "other"]


def test_a_runs_file_that_cannot_be_read_or_names_nothing_is_one_line(store: Path, tmp_path: Path) -> None:
    done = bedside("summary", "--runs-file", tmp_path / "missing.txt", "--store", store)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "cannot read the runs file" in done.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    done = bedside("summary", "--runs-file", empty, "--store", store)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "names no run" in done.stderr
