"""The store against hostile files, disks and ids: a damaged Delta log, a full disk, a folder that is not a
store, confusable and invisible run ids, a lock read half-made. Each refused input leaves the store
byte-identical; the commands run as real processes against real Delta tables."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.conftest import snapshot
from toolkit.dataset import load_dataset
from toolkit.store import Store, StoreError
from toolkit.store.runs_ops import rename_run

ROOT = Path(__file__).resolve().parents[1]
NFC, NFD = "caf\u00e9", "cafe\u0301"


def bedside(*args: object, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI as a process (``python -m toolkit``), from the worktree."""
    return subprocess.run([sys.executable, "-m", "toolkit", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def one_line(done: subprocess.CompletedProcess, *fragments: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("bedside: error: "), done.stderr
    assert "panicked" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def checksum(root: Path) -> str:
    return hashlib.sha256(json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in snapshot(root).items()},
                                     sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile-inputs")
    cases = list(load_dataset(None).raw_cases)
    out = {}
    for i in range(3):
        out[f"f{i}"] = folder / f"f{i}.jsonl"
        out[f"f{i}"].write_text("".join(json.dumps(r) + "\n" for r in rm.make_rows(cases, seed=i)), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def two_runs(inputs, tmp_path_factory) -> Path:
    st = tmp_path_factory.mktemp("two-runs") / "store"
    for name in ("f0", "f1"):
        assert bedside("import", inputs[name], "--store", st).returncode == 0
    return st


def _summary(st: Path, run: str) -> dict:
    done = bedside("summary", "--run", run, "--store", st, "--json", "--samples", "200")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _edit_log(table: Path, change) -> None:
    """Rewrite every commit of a table's Delta log through ``change(action) -> action | None``."""
    for entry in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        kept = [a for a in (change(a) for a in actions) if a is not None]
        entry.write_text("".join(json.dumps(a) + "\n" for a in kept))


# -- 1. a damaged log ----------------------------------------------------------------------------------

def test_a_live_write_whose_rows_left_the_log_is_damaged_not_zero(two_runs: Path, tmp_path: Path) -> None:
    st = tmp_path / "store"
    subprocess.run(["cp", "-a", str(two_runs), str(st)], check=True)
    for table in ("decisions", "case_scores"):  # compare reads the stored case scores, summary the decisions
        _edit_log(st / table, lambda a: None if "add" in a and "part=f1" in a["add"]["path"] else a)
    before = checksum(st)
    compared = bedside("compare", "--all", "--store", st, "--format", "json")
    assert compared.returncode == 0, compared.stderr
    warnings = compared.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("bedside: warning: run 'f1' left out: "), compared.stderr
    assert "case_scores" in warnings[0] and "cannot be found" in warnings[0], warnings
    assert [r["run_id"] for r in json.loads(compared.stdout)["leaderboard"]] == ["f0"]
    one_line(bedside("summary", "--run", "f1", "--store", st), "'f1'", "cannot be found")
    listing = bedside("runs", "--store", st)
    assert listing.returncode == 0 and "f1: damaged: " in listing.stdout and "cannot be found" in listing.stdout
    assert checksum(st) == before


def test_stripped_statistics_read_the_same_rows(two_runs: Path, tmp_path: Path) -> None:
    st = tmp_path / "store"
    subprocess.run(["cp", "-a", str(two_runs), str(st)], check=True)
    clean = _summary(st, "f1")

    def strip(action: dict) -> dict:
        if "add" in action:
            action["add"].pop("stats", None)
        return action

    for table in ("answers", "judgments", "decisions"):
        _edit_log(st / table, strip)
    Store.open(st)  # (a fresh process reads it below)
    assert _summary(st, "f1") == clean
    listing = bedside("runs", "--store", st, "--json")
    assert listing.returncode == 0 and not any(r["damaged"] for r in json.loads(listing.stdout)), listing.stdout


# -- 2. a full disk ------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path):
    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a small filesystem here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _big_file(folder: Path, seed: int) -> Path:
    """A result file of long, incompressible answers (~0.4 MB stored)."""
    import random
    import string

    rnd = random.Random(seed)
    rows = rm.make_rows(list(load_dataset(None).raw_cases), seed=seed)
    for row in rows:
        if "answer" in row:
            row["answer"] = "".join(rnd.choices(string.ascii_letters, k=12000))
    path = folder / f"big{seed}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_full_disk_is_one_line_and_runs_rm_frees_it(small_disk: Path, tmp_path: Path) -> None:
    st = small_disk / "store"
    files = [_big_file(tmp_path, seed) for seed in range(7)]
    imported = []
    for path in files:
        before = checksum(st)
        done = bedside("import", path, "--store", st)
        if done.returncode:
            one_line(done, f"no space left on {st}")
            assert checksum(st) == before  # nothing half-written: not a file more, not a byte
            break
        imported.append(path.stem)
    else:
        pytest.fail("the small disk never filled")
    one_line(bedside("import", files[-1], "--store", st), "no space left on")  # again: no panic either
    # A disk with not a byte free: even the removal's commit cannot be written, and says so.
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    before = checksum(st)
    one_line(bedside("runs", "rm", imported[0], "--yes", "--store", st), "no space left on", "not even")
    assert checksum(st) == before
    filler.unlink()
    free = os.statvfs(small_disk).f_bavail
    done = bedside("runs", "rm", imported[0], "--yes", "--store", st)
    assert done.returncode == 0 and "panicked" not in done.stderr, done.stderr
    assert os.statvfs(small_disk).f_bavail > free  # the run's files are gone, not just unlisted
    # One run's files free about one run's room: what was left over before decides whether the next fits,
    # so a second removal makes room for it whatever the leftover.
    assert bedside("runs", "rm", imported[1], "--yes", "--store", st).returncode == 0
    assert bedside("import", files[len(imported)], "--store", st).returncode == 0
    assert sorted(Store.open(st).run_ids()) == sorted(imported[2:] + [files[len(imported)].stem])


def test_an_import_whose_later_tables_cannot_fit_writes_none_of_them(inputs, tmp_path: Path, monkeypatch) -> None:
    # The disk fills between the checks (another writer): the first check sees room, every later one none.
    # Answers must not be committed when judgments and decisions then cannot be: all are checked first.
    import toolkit.store.disk as disk
    from toolkit.dataset import load_dataset as load
    from toolkit.reference._read import import_reference

    st = tmp_path / "store"
    Store.open(st).write_dataset(load(None))  # the dataset's tables exist: only the run's rows are checked
    before = checksum(st)
    real, calls = os.statvfs, []

    def filling(path):  # noqa: ANN001, ANN202 - os.statvfs's own signature
        calls.append(path)
        got = real(path)
        return got if len(calls) == 1 else os.statvfs_result((got.f_bsize, got.f_frsize, got.f_blocks, 0, 0,
                                                               *got[5:]))
    monkeypatch.setattr(disk.os, "statvfs", filling)
    with pytest.raises(StoreError, match="no space left on"):
        import_reference(Store.open(st), inputs["f0"], load(None), "f0")
    monkeypatch.undo()
    assert checksum(st) == before and not Store.open(st).run_ids()


# -- 3. a folder that is not a store ---------------------------------------------------------------------

def test_only_an_empty_or_new_folder_becomes_a_store(inputs, tmp_path: Path) -> None:
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    before = snapshot(other)
    one_line(bedside("import", inputs["f0"], env={"BEDSIDE_STORE": str(other)}), str(other), "not a bedside store")
    one_line(bedside("runs", "--store", other), str(other), "not a bedside store")
    one_line(bedside("compare", "--all", "--store", other), "not a bedside store")
    assert snapshot(other) == before and sorted(os.listdir(other)) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert bedside("import", inputs["f0"], "--store", empty).returncode == 0
    assert (empty / ".bedside-store").read_text().startswith("bedside-store ")
    # A store of an earlier version (tables, no marker) is still one, and is marked by its next write.
    (empty / ".bedside-store").unlink()
    assert bedside("runs", "--store", empty).returncode == 0 and not (empty / ".bedside-store").exists()
    assert bedside("import", inputs["f1"], "--store", empty).returncode == 0
    assert (empty / ".bedside-store").exists()


# -- 4. run ids ------------------------------------------------------------------------------------------

REFUSED = [("", "empty"), (" ", "blank"), ("\x7f", "control"), (" a", "space"), ("a\t", "space"),
           ("a\x85b", "control"), ("a\x1bb", "control"), ("a\u202eb", "bidirectional"),
           ("a\u2066b", "bidirectional"), ("a\u200fb", "bidirectional"), ("a\u061cb", "bidirectional"),
           ("a\u200bb", "invisible"), ("a\ufeffb", "invisible"), ("a\u2060b", "invisible"), ("a\u00adb", "invisible")]


def test_invisible_and_reordering_run_ids_are_refused(inputs, tmp_path: Path) -> None:
    st = tmp_path / "store"
    assert bedside("import", inputs["f0"], "--store", st).returncode == 0
    before = checksum(st)
    for run_id, why in REFUSED[:4] + REFUSED[7:8]:  # through the CLI: --run-id "" no longer means the file's name
        one_line(bedside("import", inputs["f1"], "--run-id", run_id, "--store", st), why)
    one_line(bedside("runs", "rename", "f0", "a\u202eb", "--store", st), "bidirectional")
    store = Store.open(st)
    for run_id, why in REFUSED:  # the store's one rule, whoever calls it
        with pytest.raises(StoreError, match=why):
            store.commit_run(run_id, None, {"dataset_sha256": "x", "source": "t"})
        with pytest.raises(StoreError, match=why):
            rename_run(store, "f0", run_id)
    assert checksum(st) == before


def test_nfc_and_nfd_are_one_run(inputs, tmp_path: Path) -> None:
    st = tmp_path / "store"
    assert bedside("import", inputs["f0"], "--run-id", NFD, "--store", st).returncode == 0
    assert Store.open(st).run_ids() == [NFC]
    before = checksum(st)
    one_line(bedside("import", inputs["f1"], "--run-id", NFC, "--store", st), "exists")
    assert checksum(st) == before
    assert _summary(st, NFD) == _summary(st, NFC)
    assert bedside("runs", "rm", NFD, "--yes", "--store", st).returncode == 0
    assert Store.open(st).run_ids() == []


def test_file_names_give_checked_run_ids_each_on_its_own_line(inputs, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    text = inputs["f0"].read_bytes()
    (folder / "good.jsonl").write_bytes(text)
    (folder / " padded.jsonl").write_bytes(text)
    with open(os.path.join(os.fsencode(folder), b"bad\xff.jsonl"), "wb") as handle:
        handle.write(text)
    st = tmp_path / "store"
    done = bedside("import", folder, "--store", st)
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("bedside: error: ")]
    assert done.returncode == 1 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "bedside: imported 1 of 3 files; 2 not imported (above)"
    assert any("bad\\xff.jsonl" in line and "not UTF-8" in line for line in lines), lines
    assert any("padded.jsonl" in line and "space" in line for line in lines), lines
    assert Store.open(st).run_ids() == ["good"]


def test_the_store_applies_the_run_id_rule_itself(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    with pytest.raises(StoreError, match="bidirectional"):
        store.commit_run("a\u202eb", None, {"dataset_sha256": "x", "source": "t"})
    store.commit_run(NFD, None, {"dataset_sha256": "x", "source": "t"})
    assert store.run_ids() == [NFC] and store.run(NFD)["run_id"] == NFC


# -- 5. the lock file ----------------------------------------------------------------------------------

def wait_for_file(path: Path, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until ``process`` makes ``path`` (polled, bounded); fails at once when the process ended without it."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the holder ended ({process.returncode}) before it made {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout:.0f} s"
        time.sleep(0.01)


def test_a_held_lock_always_names_its_holder(tmp_path: Path) -> None:
    """A holder slowed down while it writes who it is (a loaded machine): the lock is not there until whole."""
    st = tmp_path / "store"
    Store.open(st).commit_run("r", None, {"dataset_sha256": "x", "source": "t"})
    holder = subprocess.Popen([sys.executable, "-c", f"""
import os, sys, time
def wait_for(name):  # the test's signal, polled (bounded)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join({str(tmp_path)!r}, name)) and time.monotonic() < deadline:
        time.sleep(0.01)
real_write, real_pwrite = os.write, os.pwrite
def slow(write):
    def wrapper(fd, data, *rest):
        if b'"pid"' in bytes(data):
            open({str(tmp_path / "writing")!r}, "w").close()
            wait_for("looked")  # stopped half-way through writing who it is until the test has looked
        return write(fd, data, *rest)
    return wrapper
os.write, os.pwrite = slow(real_write), slow(real_pwrite)
from toolkit.store import Store
with Store.open({str(st)!r}).lock("r"):
    open({str(tmp_path / "held")!r}, "w").close()
    wait_for("refused")
"""], cwd=ROOT)
    try:
        wait_for_file(tmp_path / "writing", holder)
        try:  # while the holder is still writing who it is: either the lock is free, or it says who holds it
            with Store.open(st).lock("r"):
                seen = "free"
        except StoreError as error:
            seen = str(error)
        assert seen == "free" or f"pid {holder.pid} " in seen, seen
        (tmp_path / "looked").touch()
        wait_for_file(tmp_path / "held", holder)
        with pytest.raises(StoreError, match=rf"is being written by pid {holder.pid} "):
            with Store.open(st).lock("r"):
                pass
    finally:
        (tmp_path / "looked").touch()
        (tmp_path / "refused").touch()
        assert holder.wait(30) == 0
    with Store.open(st).lock("r"):  # released: free again, and no lock file stays behind
        pass
    assert not list((st / ".locks").glob("*.lock"))


def test_an_older_store_with_both_spellings_keeps_both_reachable(inputs, tmp_path: Path, monkeypatch) -> None:
    """A store written before ids were normalised may hold "café" twice (NFC and NFD): each stays a run
    that every command reaches by its exact spelling, none crashes, and `runs rm` removes only the one named."""
    import toolkit.store.core as core
    import toolkit.store.paths as paths
    import toolkit.store.transaction as transaction
    st = tmp_path / "store"
    assert bedside("import", inputs["f0"], "--run-id", NFC, "--store", st).returncode == 0
    for module in (core, paths, transaction):  # as the earlier toolkit wrote ids: as given
        monkeypatch.setattr(module, "normal_run_id", lambda run_id: run_id, raising=False)
        monkeypatch.setattr(module, "new_run_id", lambda run_id, what="run id": run_id, raising=False)
    from toolkit.reference._read import import_reference
    import_reference(Store.open(st), inputs["f1"], load_dataset(None), run_id=NFD)
    monkeypatch.undo()
    assert sorted(Store.open(st).run_ids()) == sorted([NFC, NFD])
    done = bedside("summary", "--all", "--json", "--store", st)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert set(json.loads(done.stdout)) == {NFC, NFD}
    assert _summary(st, NFD) != _summary(st, NFC)
    assert bedside("runs", "rm", NFD, "--yes", "--store", st).returncode == 0
    assert Store.open(st).run_ids() == [NFC]
