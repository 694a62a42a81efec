"""print_table writes a table that fits as plain rows inside rich's frame: the text must be exactly rich's."""

from __future__ import annotations

import polars as pl
import pytest

from toolkit.cli import table as common

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
    assert used == (columns != "60")  # at 60 a header wraps: rich lays the table out
    fast, slow, _ = _both(frame, None, monkeypatch, capsys, wide=True)
    assert fast == slow


def test_cells_wider_than_their_characters_go_through_rich(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for odd in ("naïve", "宽字符", "…"):
        fast, slow, used = _both(pl.DataFrame({"run_id": ["a", odd], "v": [1, 2]}), "t", monkeypatch, capsys)
        assert not used and fast == slow


def test_markup_emoji_codes_and_controls_are_printed_as_text(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    """A run id is text, never rich markup: ``[bold]`` and ``:smile:`` print as they are, a tab as ``\\x09``,
    in the plain rows and through rich alike."""
    monkeypatch.setenv("COLUMNS", "80")
    for odd, shown in (("[bold]x[/bold]", "[bold]x[/bold]"), ("time 10:20:30 :smile:", "time 10:20:30 :smile:"),
                       ("tab\there", "tab\\x09here"), ("[red]t[/red]", "[red]t[/red]")):
        fast, slow, used = _both(pl.DataFrame({"run_id": ["a", odd], "v": [1, 2]}), f"title {odd}", monkeypatch,
                                 capsys)
        assert used and fast == slow
        assert fast.count(shown) == 2  # in the title and in its row


def test_a_table_that_must_wrap_goes_through_rich(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    frame = pl.DataFrame({"run_id": ["r"], "text": ["word " * 20]})
    fast, slow, used = _both(frame, None, monkeypatch, capsys)
    assert not used and fast == slow
