"""A store on an ``s3://`` URL against a real S3 API on loopback (moto's server, ``tests/s3_support.py``):
concurrent writers of several processes, a writer killed at random points, a lease taken over after it
expired, an unsafe backend refused, and each run equal to the same import into a local store."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests import reference_model as rm
from tests.s3_support import s3_env, s3_server, s3_store, wait_until_unlocked  # noqa: F401 - fixtures
from toolkit.cli import main
from toolkit.store import Store, StoreError
from toolkit.store.delta import RUN_DATA

SORT = {"answers": ["case_id", "sample"], "judgments": ["case_id", "sample", "judge_model", "judge_pass"],
        "decisions": ["case_id", "sample", "judge_model", "judge_pass", "item_id"]}


def _command(args: list[str]) -> list[str]:
    code = f"import sys\nsys.argv = ['bedside', *{args!r}]\nfrom toolkit.console import run\nsys.exit(run())"
    return [sys.executable, "-c", code]


def bedside(args: list[str]) -> subprocess.CompletedProcess:
    """``bedside ARGS`` as a process, in this process's environment (the S3 settings the fixture set)."""
    return subprocess.run(_command(args), capture_output=True, text=True)


def _results(root: Path, sample_dataset, names: list[str], rows: int | None = None) -> dict[str, Path]:
    root.mkdir(exist_ok=True)
    out = {}
    for seed, name in enumerate(names, start=1):
        data = rm.make_rows(list(sample_dataset.raw_cases), seed=seed, error_rate=0.1)[:rows]
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
        out[name] = root / f"{name}.jsonl"
    return out


def _rows(store: Store, table: str, run_id: str) -> pl.DataFrame:
    frame = store.read(table, [run_id])
    keys = [c for c in SORT.get(table, ["case_id"]) if c in frame.columns]
    return frame.sort(keys) if keys else frame


def _same_runs(remote: Store, local: Store, run_ids: list[str]) -> None:
    """Every row of every run's data and score tables alike in both stores (no duplicate, nothing lost)."""
    for run_id in run_ids:
        for table in RUN_DATA:
            mine, theirs = _rows(remote, table, run_id), _rows(local, table, run_id)
            assert mine.height == theirs.height, (run_id, table)
            assert mine.drop("run_id", strict=False).equals(theirs.drop("run_id", strict=False)), (run_id, table)


def _summary(store: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["summary", "--all", "--json", "--samples", "500", "--store", store]) == 0
    return json.loads(capsys.readouterr().out)


def test_four_writers_and_a_same_run_pair_into_one_s3_store(s3_env, tmp_path: Path, sample_dataset,
                                                             capsys) -> None:
    """The issue's check: 4 imports of different runs and 2 of the same run at once into s3://team-bucket/store
    give 5 runs, the pair's loser one line and a non-zero exit, and every run as the same import locally."""
    s3_env.make_bucket("team-bucket")
    url = "s3://team-bucket/store"
    files = _results(tmp_path / "results", sample_dataset, ["alpha", "beta", "gamma", "delta", "same"], rows=20)
    jobs = [["import", str(files[n]), "--store", url] for n in ("alpha", "beta", "gamma", "delta")]
    jobs += [["import", str(files["same"]), "--store", url]] * 2
    procs = [subprocess.Popen(_command(job), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for job in jobs]
    done = [(p.wait(120), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in done[:4]] == [0, 0, 0, 0], [err for _, _, err in done]
    pair = sorted(done[4:], key=lambda d: d[0])
    assert pair[0][0] == 0 and pair[1][0] != 0, pair
    loser = pair[1][2]
    assert loser.count("\n") == 1 and ("run 'same'" in loser), loser
    assert "being written by" in loser or "exists" in loser

    local = tmp_path / "local"
    assert main(["import", str(tmp_path / "results"), "--store", str(local)]) == 0
    remote = Store.open(url)
    assert sorted(remote.run_ids()) == ["alpha", "beta", "delta", "gamma", "same"]
    assert remote.damaged() == {}
    _same_runs(remote, Store.open(local), remote.run_ids())
    assert _summary(url, capsys) == _summary(str(local), capsys)


def test_a_writer_killed_at_random_points_leaves_the_store_whole(s3_env, s3_store: str, tmp_path: Path,
                                                                 sample_dataset, monkeypatch) -> None:
    """kill -9 of an import at a random moment: the store stays readable, the run is either all there or
    absent, and once the dead writer's lease has run out the same import completes it."""
    monkeypatch.setenv("BEDSIDE_LOCK_LEASE_S", "2")
    files = _results(tmp_path / "results", sample_dataset, ["victim", "other"])
    assert bedside(["import", str(files["other"]), "--store", s3_store]).returncode == 0
    local = tmp_path / "local"
    assert main(["import", str(files["victim"]), "--store", str(local)]) == 0
    rng = random.Random(int(os.environ.get("BEDSIDE_TEST_SEED", "21")))
    for delay in sorted(rng.uniform(0.5, 5.0) for _ in range(2)):
        proc = subprocess.Popen(_command(["import", str(files["victim"]), "--replace", "--store", s3_store]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = Store.open(s3_store)
        assert store.damaged() == {}
        assert "other" in store.run_ids()
        if "victim" in store.run_ids():  # a whole run: its rows and scores as the local import's
            _same_runs(store, Store.open(local), ["victim"])
    wait_until_unlocked(s3_store)  # the killed writer's lease runs out
    again = bedside(["import", str(files["victim"]), "--replace", "--store", s3_store])
    assert again.returncode == 0, again.stderr
    store = Store.open(s3_store)
    assert sorted(store.run_ids()) == ["other", "victim"] and store.damaged() == {}
    _same_runs(store, Store.open(local), ["victim"])


def test_a_dead_holders_lease_names_it_then_expires_and_is_taken_over(s3_env, s3_store: str, tmp_path: Path,
                                                                     sample_dataset) -> None:
    files = _results(tmp_path / "results", sample_dataset, ["held"], rows=10)
    lease = 8.0  # the holder's: long enough for the next command to start while it runs
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom toolkit.store import Store\n"
        f"with Store.open({s3_store!r}).lock('held'):\n    print('held', flush=True)\n    time.sleep(120)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "BEDSIDE_LOCK_LEASE_S": str(lease)})
    assert holder.stdout.readline().strip() == "held"
    ends = time.monotonic() + lease
    holder.send_signal(signal.SIGKILL)  # killed while holding it: its lease is never released
    holder.wait()
    refused = bedside(["import", str(files["held"]), "--store", s3_store])
    assert time.monotonic() < ends, "too slow to see the lease held: the machine is overloaded"
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"run 'held' is being written by pid {holder.pid} on {socket.gethostname()}" in refused.stderr
    assert " since 20" in refused.stderr and "lease ends" in refused.stderr
    assert Store.open(s3_store).run_ids() == []
    wait_until_unlocked(s3_store)  # the dead holder's lease runs out
    taken = bedside(["import", str(files["held"]), "--store", s3_store])
    assert taken.returncode == 0, taken.stderr
    assert Store.open(s3_store).run_ids() == ["held"]


def test_a_lease_taken_over_is_noticed_by_its_late_holder(s3_env, s3_store: str, monkeypatch) -> None:
    from toolkit.store import leases
    from toolkit.store.location import parse

    lease = 4.0
    monkeypatch.setenv("BEDSIDE_LOCK_LEASE_S", str(lease))
    path = parse(s3_store) / ".locks" / "probe.lock"
    late = leases.acquire(path, "run 'probe'")
    ends = time.monotonic() + lease
    late._stop.set()  # a holder that stalls: it renews no more
    late._renewer.join()
    with pytest.raises(StoreError, match="run 'probe' is being written by pid"):
        leases.acquire(path, "run 'probe'")
    assert time.monotonic() < ends, "too slow to see the lease held: the machine is overloaded"
    wait_until_unlocked(s3_store)  # the stalled holder's lease runs out
    taker = leases.acquire(path, "run 'probe'")
    leases.release(late)  # finds the lock is not its own any more, and leaves it
    assert late.lost and "taken over" in late.lost
    with pytest.raises(StoreError, match="taken over"):
        leases.check(late)
    with pytest.raises(StoreError, match="being written by pid"):
        leases.acquire(path, "run 'probe'")
    leases.release(taker)
    leases.release(leases.acquire(path, "run 'probe'"))


def test_a_writer_stalled_past_its_lease_does_not_commit_over_the_taker(s3_env, s3_store: str, tmp_path: Path,
                                                                       sample_dataset, monkeypatch, capsys) -> None:
    """A writer paused (SIGSTOP, a swapped-out laptop) just before its runs commit, for longer than its lease,
    while another machine takes the lock over and commits the same run: on waking it must not commit (a
    second runs row for the run) nor sweep the taker's rows; one line, non-zero exit."""
    from toolkit.store import locks, transaction

    monkeypatch.setenv("BEDSIDE_LOCK_LEASE_S", "2")
    files = _results(tmp_path / "results", sample_dataset, ["late", "taker"], rows=8)
    next_row = transaction._next_row

    def stalled(*args, **kwargs):
        lease = next(iter(locks._LEASES.values()))
        lease._stop.set()  # the whole process stalls: its renewer too
        lease._renewer.join()
        wait_until_unlocked(s3_store)  # the stalled writer's lease runs out: the taker may take the run over
        taker = bedside(["import", str(files["taker"]), "--run-id", "late", "--store", s3_store])
        assert taker.returncode == 0, taker.stderr
        return next_row(*args, **kwargs)

    monkeypatch.setattr(transaction, "_next_row", stalled)
    capsys.readouterr()
    assert main(["import", str(files["late"]), "--run-id", "late", "--store", s3_store]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "taken over" in err, err
    monkeypatch.setattr(transaction, "_next_row", next_row)
    local = tmp_path / "local"
    assert main(["import", str(files["taker"]), "--run-id", "late", "--store", str(local)]) == 0
    store = Store.open(s3_store)
    assert store.run_ids() == ["late"] and store.damaged() == {}
    _same_runs(store, Store.open(local), ["late"])


def test_an_unsafe_backend_is_refused_for_writing_with_one_line(s3_env, s3_store: str, tmp_path: Path,
                                                                sample_dataset, monkeypatch) -> None:
    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=5)
    monkeypatch.setenv("AWS_CONDITIONAL_PUT", "disabled")
    done = bedside(["import", str(files["alpha"]), "--store", s3_store])
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "refusing to write" in done.stderr and "AWS_CONDITIONAL_PUT=etag" in done.stderr
    assert "AWS_S3_LOCKING_PROVIDER=dynamodb" in done.stderr
    from toolkit.store.location import parse

    assert parse(s3_store).listing() == []  # nothing written
    monkeypatch.setenv("AWS_S3_LOCKING_PROVIDER", "dynamodb")  # a locking provider makes it safe: not refused here
    from toolkit.store.location import unsafe_to_write

    assert unsafe_to_write() is None


@pytest.mark.parametrize("args, words", [
    (["runs", "--store", "s3://"], "names a bucket"),
    (["runs", "--store", "gs://bucket/store"], "not a store location"),
    (["runs", "--store", "s3://no-such-bucket/store"], "no bucket 'no-such-bucket' there"),
    (["summary", "--all", "--store", "s3://no-such-bucket/store"], "no bucket 'no-such-bucket' there"),
])
def test_a_bad_store_url_is_one_line(s3_env, args: list[str], words: str) -> None:
    done = bedside(args)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


@pytest.mark.parametrize("prefix", ["a/../b", "./dot", "p%2Fq", "h#frag", "q?x=1", "back\\slash"])
def test_a_store_prefix_two_clients_would_read_apart_is_refused(s3_env, s3_store: str, tmp_path: Path,
                                                                 sample_dataset, prefix: str, capsys) -> None:
    """pyarrow takes a key as it is, delta-rs parses it as a URL ('..' resolved, %2F decoded, '#' and '?' cut
    off): an import would say it stored a run that `runs` then does not find. One line, nothing written."""
    from toolkit.store.location import parse

    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=3)
    bucket = parse(s3_store).parent
    capsys.readouterr()
    assert main(["import", str(files["alpha"]), "--store", f"{bucket}/{prefix}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be part of" in err, err
    assert bucket.listing() == []


def test_a_plain_http_endpoint_needs_allow_http(s3_env, s3_store: str, monkeypatch) -> None:
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    done = bedside(["runs", "--store", s3_store])
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "AWS_ALLOW_HTTP=true" in done.stderr


def test_bedside_store_names_an_s3_store(s3_env, s3_store: str, tmp_path: Path, sample_dataset,
                                         monkeypatch) -> None:
    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=5)
    monkeypatch.setenv("BEDSIDE_STORE", s3_store)
    monkeypatch.chdir(tmp_path)
    assert bedside(["import", str(files["alpha"])]).returncode == 0
    listing = bedside(["runs", "--json"])
    assert listing.returncode == 0 and [r["run_id"] for r in json.loads(listing.stdout)] == ["alpha"]
    assert not (tmp_path / "s3:").exists() and not (tmp_path / "data").exists()


def test_a_collector_killed_at_a_random_point_resumes_from_its_journal(s3_env, s3_store: str,
                                                                       monkeypatch) -> None:
    """kill -9 of `bedside run` into an s3 store: its journal (on this machine) and the store let the same
    command finish the run once the dead writer's lease has run out: every case once, nothing damaged."""
    from toolkit.sim import SimConfig, SimServer

    monkeypatch.setenv("BEDSIDE_LOCK_LEASE_S", "2")
    rng = random.Random(int(os.environ.get("BEDSIDE_TEST_SEED", "21")))
    with SimServer(SimConfig()) as sim:
        args = ["run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
                "--limit", "10", "--concurrency", "2", "--progress", "none", "--store", s3_store]
        proc = subprocess.Popen(_command(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(3.0, 9.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = Store.open(s3_store)
        assert store.damaged() == {}
        wait_until_unlocked(s3_store)
        done = bedside(args)
        assert done.returncode == 0, done.stderr
    store = Store.open(s3_store)
    assert store.run_ids() == ["sim/strong"] and store.damaged() == {}
    answers = store.read("answers", ["sim/strong"])
    assert answers.height == 10 and answers.select("case_id", "sample").n_unique() == 10
    judgments = store.read("judgments", ["sim/strong"])
    assert judgments.select("case_id", "sample", "judge_model", "judge_pass").n_unique() == judgments.height


def test_an_s3_stores_journals_are_on_this_machine_by_store(s3_env, s3_store: str, tmp_path: Path) -> None:
    store = Store.open(s3_store)
    folder = store.journal_dir("run/1")
    assert isinstance(folder, Path) and folder.is_relative_to(tmp_path / "state" / "bedside" / "journals")
    assert folder.name == "run%2F1" and Store.open(s3_store + "-other").journal_dir("run/1") != folder


def test_the_demo_fills_an_s3_store_and_writes_its_report_here(s3_env, s3_store: str, tmp_path: Path,
                                                                monkeypatch) -> None:
    """`bedside demo --store s3://…` collects into the bucket (no local folder named after the URL) and
    writes its report on this machine in a folder named for the store, beside the local demo's report
    (reports/demo, left as it was), and says where."""
    from toolkit.report.model import slug

    monkeypatch.chdir(tmp_path)
    local = tmp_path / "reports" / "demo" / "index.html"
    local.parent.mkdir(parents=True)
    local.write_text("the local demo's report")
    done = bedside(["demo", "--store", s3_store])
    assert done.returncode == 0, done.stderr[-800:]
    folder = Path("reports", f"demo-{slug(s3_store)}")
    assert not (tmp_path / "s3:").exists() and (tmp_path / folder / "index.html").is_file()
    assert local.read_text() == "the local demo's report"
    said = [line for line in done.stdout.splitlines() if line.startswith("report: ")]
    assert len(said) == 1 and said[0].split()[1].endswith(str(folder / "index.html")), said
    listing = bedside(["runs", "--json", "--store", s3_store])
    assert listing.returncode == 0 and len(json.loads(listing.stdout)) == 4


def test_runs_compact_and_vacuum_work_on_an_s3_store(s3_env, s3_store: str, tmp_path: Path, sample_dataset) -> None:
    files = _results(tmp_path / "results", sample_dataset, ["alpha", "beta"], rows=5)
    for name, path in files.items():
        assert bedside(["import", str(path), "--run-id", name, "--store", s3_store]).returncode == 0
    before = bedside(["summary", "--all", "--json", "--store", s3_store])
    done = bedside(["runs", "compact", "--vacuum", "--retention", "0", "--store", s3_store])
    assert done.returncode == 0, done.stderr[-600:]
    after = bedside(["summary", "--all", "--json", "--store", s3_store])
    assert before.returncode == after.returncode == 0 and before.stdout == after.stdout


@pytest.mark.parametrize("run_id", ["../x", "a%2Fb", "a/../b"])
def test_run_ids_a_local_store_takes_are_taken_by_an_s3_store(s3_env, s3_store: str, tmp_path: Path,
                                                              sample_dataset, run_id: str) -> None:
    """A lock table's name went through delta-rs's URL decoding ('%2E%2E' became '..'): such ids failed."""
    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=5)
    done = bedside(["import", str(files["alpha"]), "--run-id", run_id, "--store", s3_store])
    assert done.returncode == 0, done.stderr[-600:]
    listing = bedside(["runs", "--json", "--store", s3_store])
    assert [r["run_id"] for r in json.loads(listing.stdout)] == [run_id]
