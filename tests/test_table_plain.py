"""print_table writes a table that fits as plain rows inside rich's frame: the text must be exactly rich's."""

from __future__ import annotations

import polars as pl
import pytest

from toolkit.cli import common

PLAIN = common._plain


def _both(frame: pl.DataFrame, title: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
          optional: tuple[str, ...] = (), wide: bool = False) -> tuple[str, str, bool]:
    calls = []
    real = common._print_plain
    monkeypatch.setattr(common, "_print_plain", lambda *a: (calls.append(1), real(*a)))
    common.print_table(frame, title, optional, wide=wide)
    fast = capsys.readouterr().out
    monkeypatch.setattr(common, "_plain", lambda cell: False)  # rich lays out every cell
    common.print_table(frame, title, optional, wide=wide)
    slow = capsys.readouterr().out
    monkeypatch.setattr(common, "_plain", PLAIN)
    return fast, slow, bool(calls)


@pytest.mark.parametrize("columns", ["80", "60", "200"])
def test_plain_rows_equal_rich(columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    frame = pl.DataFrame({
        "run_id": ["model-01", "a-much-longer-run-identifier", ""],
        "mean": [0.5, None, 1 / 3], "n": [10, 2, 300], "dataset_sha256": ["ab" * 32, "cd" * 32, "ef" * 32],
        "benchmarks_missing": ["x y", "", "z"],
    })
    fast, slow, used = _both(frame, "leaderboard", monkeypatch, capsys)
    assert fast == slow
    assert used  # the table fits at every width here (columns are dropped first)
    fast, slow, _ = _both(frame, None, monkeypatch, capsys, wide=True)
    assert fast == slow


def test_cells_rich_would_change_go_through_rich(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for odd in ("[bold]x[/bold]", "time 10:20:30 :smile:", "naïve", "tab\there"):
        fast, slow, used = _both(pl.DataFrame({"run_id": ["a", odd], "v": [1, 2]}), "t", monkeypatch, capsys)
        assert not used and fast == slow


def test_a_table_that_must_wrap_goes_through_rich(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    frame = pl.DataFrame({"run_id": ["r"], "text": ["word " * 20]})
    fast, slow, used = _both(frame, None, monkeypatch, capsys)
    assert not used and fast == slow
