"""print_table writes the rows of a table whose cells need no wrapping inside rich's frame: the text must be
exactly rich's."""

from __future__ import annotations

import polars as pl
import pytest

from toolkit.cli import table as common

FITS = common._fits


def _both(frame: pl.DataFrame, title: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
          optional: tuple[str, ...] = (), wide: bool = False) -> tuple[str, str, bool]:
    calls = []
    real = common._print_rows
    monkeypatch.setattr(common, "_print_rows", lambda *a: (calls.append(1), real(*a)))
    common.print_table(frame, title, optional, wide=wide)
    fast = capsys.readouterr().out
    monkeypatch.setattr(common, "_fits", lambda line, width: False)  # rich lays out every cell
    common.print_table(frame, title, optional, wide=wide)
    slow = capsys.readouterr().out
    monkeypatch.setattr(common, "_fits", FITS)
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
    assert used  # at 60 a header wraps: rich draws it in the frame
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


@pytest.mark.parametrize("columns", ["40", "52", "64", "80", "120"])
def test_intervals_under_their_values_and_wrapped_headers_equal_rich(columns: str, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """A narrow terminal puts an interval under its value and wraps headers; rows of unequal height (a
    text beside a two-line estimate, an empty cell) are padded exactly as rich pads them."""
    monkeypatch.setenv("COLUMNS", columns)
    frame = pl.DataFrame({
        "run_a": ["model-27", "m", "a-longer-run-name"], "benchmark": ["landmark_trials", "x", ""],
        "delta [95% ci]": ["-0.134 [-0.214, -0.055]", "0.000 [0.000, 0.000]", "n/a (no pair)"],
        "p_value": [0.0014, None, 1.0], "p_holm": [0.3113, 1.0, None], "completed / failed / not attempted":
        ["500 / 0 / 0", "1 / 2 / 3", ""],
    })
    fast, slow, used = _both(frame, "pairwise", monkeypatch, capsys)
    assert fast == slow
    assert used
    narrow = frame.select("run_a", "delta [95% ci]", "p_holm")  # the case this path is for: intervals split
    fast, slow, used = _both(narrow, "pairwise", monkeypatch, capsys)
    assert used and fast == slow
    split = any(line.split("\u2502")[2].strip() == "[-0.214, -0.055]" for line in fast.splitlines()
                if line.count("\u2502") >= 3)
    assert split == (int(columns) <= 52)
