"""Commits under the store-wide lock of an ``s3://`` store (labels, reviews, dataset registration, runs-table
compaction) against a real S3 API on loopback (moto, ``tests/s3_support.py``): a writer stalled past its
lease while another process takes the lock over must not commit on waking; one line, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLE
from tests.s3_support import s3_env, s3_server, s3_store  # noqa: F401 - fixtures
from tests.test_labels_import import RUNS, _items, _write_csv, answers_store
from tests.test_store_s3 import bedside
from toolkit.cli import main
from toolkit.store import Store, StoreError


@pytest.fixture
def short_leases(monkeypatch) -> list:
    """Leases of 2 s for this process and the commands it starts; the leases this process takes, in order."""
    from toolkit.store import leases

    monkeypatch.setenv("BEDSIDE_LOCK_LEASE_S", "2")
    taken: list = []
    acquire = leases.acquire

    def recorded(*args, **kwargs):
        taken.append(acquire(*args, **kwargs))
        return taken[-1]

    monkeypatch.setattr(leases, "acquire", recorded)
    return taken


def _stall(lease) -> None:
    """This process stalls (a SIGSTOP, a laptop's lid closed): its lease is no longer renewed."""
    assert lease.path.name == "store.lock", lease.path
    lease._stop.set()
    lease._renewer.join()


def test_a_label_import_stalled_past_its_lease_leaves_exactly_one_label(s3_env, s3_store: str, tmp_path: Path,
                                                                         sample_dataset, short_leases,
                                                                         monkeypatch, capsys) -> None:
    """The stalled import has checked that the reviewer has no label for the item; another import of a
    contradicting label waits for the lease to run out, takes the lock over and commits. On waking the first
    must not commit too: one reviewer would hold both `met` and `not_met` for one item."""
    answers_store(s3_store, sample_dataset)
    case_id, item_id = _items(sample_dataset)[0]
    row = {"reviewer": "dr-a", "run_id": RUNS[0], "case_id": case_id, "item_id": item_id, "sample": "0"}
    late = _write_csv(tmp_path / "late.csv", [{**row, "label": "met"}])
    taker = _write_csv(tmp_path / "taker.csv", [{**row, "label": "not_met"}])
    append_rows = Store.append_rows
    took_over = []

    def stalled(self, table, rows, keys, check=None):
        def checked_then_stalled() -> None:
            if check is not None:
                check()
            _stall(short_leases[-1])
            # returns once the taker's lease wait saw this one expire and it committed its label
            took_over.append(bedside(["labels", "import", str(taker), "--store", s3_store]))

        return append_rows(self, table, rows, keys, checked_then_stalled)

    monkeypatch.setattr(Store, "append_rows", stalled)
    capsys.readouterr()
    assert main(["labels", "import", str(late), "--store", s3_store]) == 1
    err = capsys.readouterr().err
    assert took_over and took_over[0].returncode == 0, took_over[0].stderr
    assert err.count("\n") == 1 and "taken over" in err and "nothing more was written" in err, err
    labels = Store.open(s3_store).read("human_labels")
    assert labels.select("reviewer", "item_id", "label").rows() == [("dr-a", item_id, "not_met")]


class _StallingDataset:
    """A dataset whose rows, asked for after the store checked it has none of them, stall this process."""

    def __init__(self, dataset, on_rows) -> None:
        self._dataset, self._on_rows = dataset, on_rows

    def __getattr__(self, name: str):
        if name in ("cases", "rubric_items") and self._on_rows is not None:
            on_rows, self._on_rows = self._on_rows, None
            on_rows()
        return getattr(self._dataset, name)


def test_a_dataset_registration_stalled_past_its_lease_does_not_store_it_twice(s3_env, s3_store: str,
                                                                               sample_dataset, short_leases,
                                                                               monkeypatch) -> None:
    taker = []

    def stall() -> None:
        _stall(short_leases[-1])
        code = (f"from toolkit.dataset import load_dataset\nfrom toolkit.store import Store\n"
                f"Store.open({s3_store!r}).write_dataset(load_dataset({str(SAMPLE)!r}))")
        taker.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True))

    with pytest.raises(StoreError, match="taken over.*nothing more was written"):
        Store.open(s3_store).write_dataset(_StallingDataset(sample_dataset, stall))
    assert taker and taker[0].returncode == 0, taker[0].stderr
    store = Store.open(s3_store)
    assert store.read("cases").height == sample_dataset.cases.height
    assert store.read("rubric_items").height == sample_dataset.rubric_items.height


def test_a_run_removal_stalled_past_its_lease_deletes_no_labels_after_the_takeover(s3_env, s3_store: str,
                                                                                   tmp_path: Path, sample_dataset,
                                                                                   short_leases, monkeypatch,
                                                                                   capsys) -> None:
    """`runs rm` deletes the run's labels under the store lock, straight through delta (not append_rows): stalled
    there past its lease while another import takes the lock over, on waking it must not delete anything."""
    from toolkit.store import runs_ops

    answers_store(s3_store, sample_dataset)
    case_id, item_id = _items(sample_dataset)[0]
    rows = [{"reviewer": "dr-a", "run_id": run, "case_id": case_id, "item_id": item_id, "sample": "0",
             "label": "met"} for run in RUNS]
    assert main(["labels", "import", str(_write_csv(tmp_path / "both.csv", rows)), "--store", s3_store]) == 0
    other = _write_csv(tmp_path / "other.csv", [{**rows[1], "reviewer": "dr-b"}])
    drop_labels, taker = runs_ops._drop_labels, []

    def stalled(store, run_id):
        _stall(short_leases[-1])
        taker.append(bedside(["labels", "import", str(other), "--store", s3_store]))
        return drop_labels(store, run_id)

    monkeypatch.setattr(runs_ops, "_drop_labels", stalled)
    capsys.readouterr()
    assert main(["runs", "rm", RUNS[0], "--yes", "--store", s3_store]) == 1
    err = capsys.readouterr().err
    assert taker and taker[0].returncode == 0, taker[0].stderr
    assert err.count("\n") == 1 and "taken over" in err, err
    labels = Store.open(s3_store).read("human_labels")
    assert sorted(labels.select("reviewer", "run_id").rows()) == [("dr-a", RUNS[0]), ("dr-a", RUNS[1]),
                                                                 ("dr-b", RUNS[1])]
