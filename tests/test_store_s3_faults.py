"""Faults of an ``s3://`` store's reads on a real S3 API on loopback (moto behind ``FaultyProxy``,
``tests/s3_support.py``): a transient error (a 503, a connection reset) never makes ``--all`` leave a healthy
run out, and each failed read says what happened (access denied, not found, a transient error), not
"damaged part file"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.s3_support import faulty_proxy, s3_env, s3_server, s3_store  # noqa: F401 - fixtures
from tests.test_store_s3 import _results, bedside


def _two_runs(s3_store: str, tmp_path: Path, sample_dataset, proxy, monkeypatch) -> None:
    """Runs alpha and beta written to the server; what follows reads through the proxy."""
    files = _results(tmp_path / "results", sample_dataset, ["alpha", "beta"], rows=8)
    for name, path in files.items():
        done = bedside(["import", str(path), "--run-id", name, "--store", s3_store])
        assert done.returncode == 0, done.stderr
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)


def _beta_files(method: str, path: str) -> bool:
    return method == "GET" and "/part=beta/" in path and path.split("?", 1)[0].endswith(".parquet")


def _listings(method: str, path: str) -> bool:
    return method == "GET" and "list-type=2" in path and "_delta_log" not in path


@pytest.mark.parametrize("target, fault", [(_beta_files, "503"), (_beta_files, "reset"), (_listings, "503")])
def test_a_transient_error_never_leaves_a_healthy_run_out_of_all(s3_env, s3_store: str, faulty_proxy, tmp_path: Path,
                                                                  sample_dataset, target, fault, monkeypatch) -> None:
    _two_runs(s3_store, tmp_path, sample_dataset, faulty_proxy, monkeypatch)
    whole = bedside(["summary", "--all", "--json", "--samples", "200", "--store", s3_store])
    assert whole.returncode == 0 and set(json.loads(whole.stdout)) == {"alpha", "beta"}, whole.stderr
    faulty_proxy.rule = lambda method, path: fault if target(method, path) else None
    done = bedside(["summary", "--all", "--json", "--samples", "200", "--store", s3_store])
    assert faulty_proxy.faulted, "no request met the fault"
    if done.returncode == 0:  # retried through it: every run there, as without the fault
        assert done.stdout == whole.stdout
    else:
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert "left out" not in done.stderr and "damaged" not in done.stderr, done.stderr
        assert "transient" in done.stderr and "try again" in done.stderr, done.stderr


def test_access_denied_is_said_as_such(s3_env, s3_store: str, faulty_proxy, tmp_path: Path, sample_dataset,
                                       monkeypatch) -> None:
    _two_runs(s3_store, tmp_path, sample_dataset, faulty_proxy, monkeypatch)
    faulty_proxy.rule = lambda method, path: "403" if _beta_files(method, path) else None
    done = bedside(["summary", "--all", "--json", "--samples", "200", "--store", s3_store])
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "access denied" in done.stderr and "damaged" not in done.stderr, done.stderr


def test_a_version_whose_files_were_vacuumed_says_so(s3_env, s3_store: str, tmp_path: Path, sample_dataset) -> None:
    from toolkit.store import Store, StoreError

    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=8)
    assert bedside(["import", str(files["alpha"]), "--store", s3_store]).returncode == 0
    first = Store.open(s3_store).version()
    assert bedside(["import", str(files["alpha"]), "--replace", "--store", s3_store]).returncode == 0
    done = bedside(["runs", "compact", "--vacuum", "--retention", "0", "--store", s3_store])
    assert done.returncode == 0, done.stderr
    with pytest.raises(StoreError) as raised:
        Store.open(s3_store, version=first).read("answers")
    assert "vacuum" in str(raised.value) and "damaged" not in str(raised.value), raised.value
