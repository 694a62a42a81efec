"""The speed work played against: closed streams at the quick exit, Ctrl-C while helper threads run, and
failures inside helper threads. Real processes where the process is what is tested."""

from __future__ import annotations

import subprocess
import sys

from tests.test_cli_process import bedside_process


def test_a_closed_stdout_keeps_the_exit_status_and_shows_no_traceback(tmp_path, demo_store) -> None:
    usage = bedside_process(["summary", "--no-such-flag"], redirect=">&-")
    assert usage.returncode == 2, usage.stderr
    assert "Traceback" not in usage.stderr and "No such option" in usage.stderr
    empty = bedside_process(["runs", "--store", str(tmp_path / "none")], redirect=">&-")
    assert empty.returncode == 0 and "Traceback" not in empty.stderr
    # Commands that write their output themselves (sql's CSV): it is dropped, not an internal error.
    for fmt in ("csv", "table"):
        query = bedside_process(["sql", "SELECT 1 AS one", "--format", fmt, "--store", str(demo_store)], redirect=">&-")
        assert query.returncode == 0 and query.stderr == "", query.stderr


def test_a_closed_stderr_keeps_a_success_a_success(tmp_path) -> None:
    empty = bedside_process(["runs", "--store", str(tmp_path / "none")], redirect="2>&-")
    assert empty.returncode == 0
    assert "the store has no runs" in empty.stdout


def test_an_interrupted_summary_of_several_runs_stops_at_once(demo_store, monkeypatch) -> None:
    """Ctrl-C (or a failing run) while two threads summarise: the caller gets it at once, the runs not begun
    are not summarised (it waited for every run of the store)."""
    import threading
    import time

    import pytest

    import toolkit.summary as summary
    from toolkit.store import Store

    store = Store.open(demo_store)
    run_ids = store.run_ids()
    assert len(run_ids) >= 4
    data = summary.read_runs(store, run_ids, texts=False)
    started: list[str] = []
    release = threading.Event()

    def slow(run, frame, facts, options):
        started.append(run["run_id"])
        if run["run_id"] == run_ids[0]:
            raise KeyboardInterrupt
        release.wait(1.0)  # the other run under way
        return {}

    monkeypatch.setattr(summary, "_summary", slow)
    begin = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        summary.summarize_data(data, run_ids, summary.SummaryOptions())
    waited = time.monotonic() - begin
    release.set()
    assert waited < 0.5, waited
    assert len(started) < len(run_ids), started


_SLOW_SUMMARY = r'''
import os, sys, time
import toolkit.summary as summary
from toolkit.store import Store
store = Store.open(sys.argv[1])
ids = store.run_ids()
data = summary.read_runs(store, ids, texts=False)
def slow(run, frame, facts, options):
    if run["run_id"] == ids[0]:
        print("started", flush=True)
    time.sleep(3)
    return {}
summary._summary = slow
try:
    summary.summarize_data(data, ids, summary.SummaryOptions())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    os._exit(130)
'''


def test_ctrl_c_from_outside_reaches_a_summary_waiting_for_its_threads(demo_store) -> None:
    """SIGINT sent to the process (as a terminal's Ctrl-C is) may be taken by any of its threads; the main
    thread, waiting for a run's result, must still see it at once (it saw it when that run was done)."""
    import signal
    import time

    child = subprocess.Popen([sys.executable, "-c", _SLOW_SUMMARY, str(demo_store)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline() == "started\n"
        time.sleep(0.2)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline() == "interrupted\n"
        assert time.monotonic() - sent < 1.5
        assert child.wait(timeout=10) == 130
    finally:
        child.kill()
        child.wait()


def test_the_interval_of_one_row_is_a_pair_of_numbers_as_before() -> None:
    """One row of resamples (1-D): numpy's percentile gives numbers (np.float64, a float), as it did before the
    block-wise version; 0-d arrays are not JSON and not a polars value."""
    import json

    import numpy as np

    from toolkit.analysis.paired import percentile_interval

    boot = np.random.default_rng(0).random(1000)
    lo, hi = percentile_interval(boot)
    assert isinstance(lo, float) and isinstance(hi, float)
    assert json.loads(json.dumps([lo, hi])) == np.percentile(boot, [2.5, 97.5]).tolist()


def test_two_threads_asking_for_the_same_index_table_make_it_once(monkeypatch) -> None:
    """summary's two threads start on runs of the same case counts: the second waits for the table the first
    makes (it made its own copy: twice the memory, 1.28 GB instead of 0.83 GB at 200k resamples, and a core)."""
    import threading

    from toolkit.bootstrap import _cache as index_cache, _draws as mt_draws

    monkeypatch.setenv(index_cache.ENV, "off")
    made: list[int] = []
    real = mt_draws._draw

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(mt_draws, "_draw", counted)
    mt_draws.cached_indices.cache_clear()
    sizes, start = (300, 200), threading.Barrier(2)
    got: list = []

    def ask() -> None:
        start.wait()
        got.append(mt_draws.cached_indices(sizes, 4000, 11))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    mt_draws.cached_indices.cache_clear()
    assert len(made) == len(sizes) + 1  # one table: a pass per benchmark and the stratified pass
    assert got[0][0][0] is got[1][0][0]
