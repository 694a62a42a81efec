"""Say why: a run that ends with failed cases prints counts by cause with the first message of each, and
``failure_causes`` gives the same from the stored error columns."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tests.collect_support import bedside
from toolkit.sim import SimConfig, SimServer
from toolkit.failures import Cause, causes_of, failure_causes
from toolkit.store import Store


def test_causes_group_by_type_and_status_with_the_first_message() -> None:
    errors = pl.DataFrame({
        "case_id": ["a", "b", "c", "d"],
        "seq": [4, 2, 3, 1],
        "error": ["APITimeoutError: Request timed out.",
                  "InternalServerError: Error code: 500 - {'error': {'message': 'busy now'}}",
                  "APITimeoutError: Request timed out again.",
                  "InternalServerError: Error code: 503 - {'error': {'message': 'down'}}"],
    })
    assert causes_of(errors) == [Cause("APITimeoutError", 2, "Request timed out again."),
                                 Cause("InternalServerError 500", 1, "busy now"),
                                 Cause("InternalServerError 503", 1, "down")]
    assert causes_of(errors.clear()) == []


def test_a_run_with_faults_says_why_its_cases_failed(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    # every call fails, without retries: about half are 5xx, the rest hold past the client timeout
    with SimServer(SimConfig(rate_5xx=0.5, rate_timeout=1.0, timeout_hold_s=2, seed=3)) as sim:
        code, out, err = bedside("run", "--answer-model", "sim/medium", "--judge-model", "sim/judge", "--base-url",
                                 sim.base_url, "--store", store_dir, "--limit", "6", "--max-retries", "1",
                                 "--timeout", "0.3", "--progress", "none")
    assert code == 3, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("bedside: error: sim/medium: 6 cases failed: ") and "run the same command again" in line
    causes = failure_causes(Store.open(store_dir), "sim/medium")
    assert sum(c.cases for c in causes) == 6 and len(causes) >= 2, causes
    kinds = {c.cause for c in causes}
    assert "APITimeoutError" in kinds and any(k.startswith("InternalServerError 5") for k in kinds), kinds
    for cause in causes:  # the printed line is the stored causes, most frequent first
        assert f"{cause.cases} × {cause.cause}: {cause.first_message}" in line
    timeout = next(c for c in causes if c.cause == "APITimeoutError")
    assert timeout.first_message == "Request timed out."


def test_a_failure_later_retried_successfully_is_no_longer_a_cause(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    args = ("run", "--answer-model", "sim/weak", "--judge-model", "sim/judge", "--store", store_dir, "--limit", "3",
            "--max-retries", "1", "--progress", "none")
    with SimServer(SimConfig(rate_5xx=1.0)) as sim:
        assert bedside(*args, "--base-url", sim.base_url)[0] == 3
    assert [c.cases for c in failure_causes(Store.open(store_dir), "sim/weak")] == [3]
    with SimServer(SimConfig()) as sim:
        code, _, err = bedside(*args, "--base-url", sim.base_url)
    assert code == 0, err
    assert failure_causes(Store.open(store_dir), "sim/weak") == []
