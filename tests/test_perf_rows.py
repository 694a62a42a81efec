"""The benchmarks' ROW lines and the table tests/perf/run_all.py makes of them."""

from __future__ import annotations

import pytest

from tests.perf import run_all
from tests.perf.rows import Row, parse_rows, row


def test_row_prints_one_line_that_parses_back(capsys: pytest.CaptureFixture) -> None:
    printed = row("bedside --version, cold", "0.21 s wall", "<= 0.3 s", True)
    row("summary vs reference", "18.2x", ">= 25x", False)
    text = "detail line\n" + capsys.readouterr().out + "ROW not | a | row\n"
    assert text.count("ROW ") == 3
    assert parse_rows(text) == [printed, Row("summary vs reference", "18.2x", ">= 25x", False)]
    assert printed.line() == "ROW bedside --version, cold | 0.21 s wall | target <= 0.3 s | PASS"


def test_a_field_cannot_break_the_format() -> None:
    with pytest.raises(ValueError):
        row("a | b", "1", "2", True)
    with pytest.raises(ValueError):
        row("a", "1\n2", "2", True)


def test_run_all_finds_the_benchmarks_and_tables_their_rows() -> None:
    names = run_all.benchmarks()
    assert names[:2] == ["summary_speed", "compare_scale"]  # the rows first
    assert {"collect_throughput", "collect_faults", "report_speed", "strict_json"} <= set(names)
    assert "rows" not in names and "run_all" not in names and "panel" not in names
    text = run_all.table([Row("x", "1.0 s", "<= 2 s", True), Row("y", "3 s", "<= 2 s", False)])
    assert text.splitlines() == ["| what | measured | target | verdict |", "|---|---|---|---|",
                                 "| x | 1.0 s | <= 2 s | PASS |", "| y | 3 s | <= 2 s | FAIL |"]
