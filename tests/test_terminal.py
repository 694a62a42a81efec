"""Tables fit the terminal: at 80 columns the default tables show the columns that fit (identifiers and
headline numbers first) and name the rest; headers wrap between words, never inside one; ``--wide``
shows every column; CSV and JSON do not depend on the width. Through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.collect_support import bedside
from toolkit.collect.demo import run_demo
from toolkit.sim import SimConfig, SimServer

BOX = "┏┃┡│└"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's four runs, sim/medium judged twice (so that agreement has something to show)."""
    root = tmp_path_factory.mktemp("terminal") / "store"
    run_demo(str(root), latency_ms=0)
    with SimServer(SimConfig()) as sim:
        code, _, err = bedside("judge", "--run", "sim/medium", "--judge-model", "sim/judge", "--pass", "2",
                               "--judge-base-url", sim.base_url, "--store", root, "--progress", "none")
    assert code == 0, err
    return root


def at(columns: int, monkeypatch: pytest.MonkeyPatch, *args: object) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = bedside(*args)
    assert code == 0, err
    return out


def table_lines(out: str) -> list[str]:
    """Lines drawn by a table (borders, rows, titles, captions) and the notes, not summary run headers."""
    return [line for line in out.splitlines() if line and not line.startswith("sim/")]


def header_words(out: str) -> set[str]:
    return {word for line in out.splitlines() if line.startswith("┃")
            for cell in line.strip("┃").split("┃") for word in cell.split()}


COMMANDS = (("summary", "--all"), ("compare", "--all"), ("items", "--all"), ("harms", "--all"),
            ("agreement", "--run", "sim/medium"), ("variance", "--all"))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_table_fits_80_columns(store_dir: Path, monkeypatch: pytest.MonkeyPatch, command: tuple) -> None:
    out = at(80, monkeypatch, *command, "--store", store_dir)
    lines = table_lines(out)
    assert any(line.startswith("┃") for line in lines)
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long


def test_the_demo_leaderboard_does_not_wrap_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = at(80, monkeypatch, "demo", "--store", tmp_path / "s", "--progress", "none")
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 4 and all(len(line) <= 80 for line in rows)
    assert all(name in out for name in ("overall", "ci95 low", "ci95 high", "cases", "errors"))
    assert "not shown: answer_model (= run), judge_model = sim/judge" in out
    # The report the demo writes shows compare's intervals; the printed ones must say they are summary's.
    monkeypatch.setenv("COLUMNS", "80")
    code, _, err = bedside("demo", "--store", tmp_path / "s", "--progress", "none")
    assert code == 0 and "ci95 is the reference runner's percentile bootstrap" in err
    wide = at(80, monkeypatch, "demo", "--store", tmp_path / "s", "--progress", "none", "--wide")
    assert "answer model" in wide and "not shown" not in wide


def test_harms_headers_break_only_between_words(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = at(80, monkeypatch, "harms", "--all", "--store", store_dir, "--format", "csv")
    metrics = pl.read_csv(csv.encode())["metric"].unique().to_list()
    words = {w for name in ["run_id", *metrics] for w in name.split("_")}  # a table per scope
    for columns in (80, 200):
        shown = header_words(at(columns, monkeypatch, "harms", "--all", "--store", store_dir))
        assert shown and shown <= words, shown - words
    narrow = at(80, monkeypatch, "harms", "--all", "--store", store_dir)
    wide = at(200, monkeypatch, "harms", "--all", "--store", store_dir)
    assert "precision" not in header_words(narrow) and "precision" in narrow  # named in the caption
    assert {"precision", "recall", "f1"} <= header_words(wide)
    everything = header_words(at(80, monkeypatch, "harms", "--all", "--store", store_dir, "--wide"))
    assert everything == words and "not shown" not in at(80, monkeypatch, "harms", "--all", "--store", store_dir,
                                                          "--wide")


def test_narrow_tables_keep_what_a_reader_needs(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairwise = at(80, monkeypatch, "compare", "--all", "--store", store_dir, "--section", "pairwise")
    assert {"run", "a", "b", "delta", "[95%", "paired", "stratified", "t]", "p", "value", "holm"} <= header_words(pairwise)
    assert "wilcoxon" not in header_words(pairwise)
    wide = at(200, monkeypatch, "compare", "--all", "--store", store_dir, "--section", "pairwise")
    assert {"wilcoxon", "value", "holm", "bh"} <= header_words(wide)
    missed = at(80, monkeypatch, "items", "--all", "--store", store_dir, "--section", "missed")
    assert {"text", "match", "rate"} <= header_words(missed) and "item_id" in missed  # hidden, and named
    assert "miss_rate (= 1 - match_rate)" in missed  # derived: left out first, with its formula


def test_csv_and_json_do_not_depend_on_the_width(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for fmt in ("csv", "json"):
        args = ("compare", "--all", "--store", store_dir, "--format", fmt, "--samples", "200")
        narrow, wide = at(80, monkeypatch, *args), at(200, monkeypatch, *args)
        assert narrow == wide and "wilcoxon_p" in narrow and "not shown" not in narrow



def test_long_item_text_is_cut_with_an_ellipsis() -> None:
    """In terminal tables, item texts longer than 100 characters are cut to 99 plus an ellipsis, so a reader
    can tell a cut text from a short one; shorter texts stay whole (CSV and JSON keep every text whole)."""
    from toolkit.cli.analysis import _table_view

    texts = ["x" * 99, "y" * 100, "z" * 101 + " tail"]
    shown = _table_view(pl.DataFrame({"text": texts}))["text"].to_list()
    assert shown == ["x" * 99, "y" * 100, "z" * 99 + "…"]


def test_a_column_with_one_value_goes_first_and_is_named_with_it(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import polars as pl

    from toolkit.cli.common import print_table

    monkeypatch.setenv("COLUMNS", "80")
    frame = pl.DataFrame({  # agreement's pairs table of one run: the run id says nothing about a row
        "run_id": ["sim/a-rather-long-run-name"] * 3, "rater_a": ["sim/judge#1", "sim/judge#1", "sim/noisy-judge#1"],
        "rater_b": ["sim/noisy-judge#1", "sim/noisy-judge#2", "sim/noisy-judge#2"], "items": [232] * 3,
        "percent_agreement": [0.89, 0.88, 0.93], "cohen_kappa": [0.77, 0.76, 0.85], "cases": [30] * 3})
    print_table(frame, "pairs")
    out = capsys.readouterr().out
    header = header_words(out)
    assert {"rater", "a", "b", "percent", "agreement", "cohen", "kappa"} <= header
    assert "id" not in header and "run_id = sim/a-rather-long-run-name" in out  # its value in the caption
    assert max(len(line) for line in out.splitlines()) <= 80


def streams(columns: int, monkeypatch: pytest.MonkeyPatch, *args: object) -> tuple[str, str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = bedside(*args)
    assert code == 0, err
    return out, err


def test_harms_at_80_columns_shows_the_omission_and_commission_rates(store_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = streams(80, monkeypatch, "harms", "--all", "--store", store_dir)
    words = header_words(out)
    assert {"f1", "severe", "omission", "commission", "case", "rate"} <= words
    assert all(len(line) <= 80 for line in out.splitlines())


def test_agreement_shows_fleiss_and_krippendorff_and_drops_an_empty_column(store_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = streams(80, monkeypatch, "agreement", "--all", "--store", store_dir, "--section", "summary",
                     "--samples", "200")
    words = header_words(out)
    assert {"fleiss", "krippendorff", "alpha", "percent", "agreement"} <= words
    assert "cohen" not in words and "cohen_kappa (empty)" in out  # every run here has three raters


def test_compare_shows_every_benchmark_raw_p_and_coverage(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = at(80, monkeypatch, "compare", "--all", "--store", store_dir, "--format", "csv", "--section", "benchmarks",
             "--samples", "200")
    benchmarks = set(pl.read_csv(csv.encode())["benchmark"])
    out, err = streams(80, monkeypatch, "compare", "--all", "--store", store_dir, "--samples", "200")
    assert len(benchmarks) == 10 and all(b in out for b in benchmarks)  # as rows: four runs do not fit across
    words = header_words(out)
    assert {"p", "value", "holm", "completed", "failed", "not", "attempted", "overall"} <= words
    assert "answer_model (= run_id)" in out and "model" not in words  # a copy of the run id goes first
    assert all(len(line) <= 80 for line in out.splitlines())
    two, _ = streams(80, monkeypatch, "compare", "--run", "sim/weak", "--run", "sim/strong", "--store", store_dir,
                     "--section", "benchmarks", "--samples", "200")
    assert {"sim/weak", "sim/strong"} <= header_words(two)  # two runs fit across, the benchmarks down


def test_notes_follow_the_tables_on_stderr_one_line_each(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for command in (("compare", "--all", "--samples", "200"), ("harms", "--all", "--samples", "200"),
                    ("items", "--all")):
        out, err = streams(80, monkeypatch, *command, "--store", store_dir)
        # stdout: the tables alone, a title first (compare: after its verdict lines, as the report's summary)
        lines = out.splitlines(keepends=True)
        verdict = next(i for i, line in enumerate(lines) if line.startswith(" ")) if command[0] == "compare" else 0
        tables = "".join(lines[verdict:])
        assert "note:" not in out and tables.startswith(" ") and out.startswith(
            "4 runs compared" if command[0] == "compare" else " ")
        lines = err.splitlines()
        assert lines and all(line.startswith("note: ") for line in lines)
    json_out, _ = streams(80, monkeypatch, "harms", "--all", "--store", store_dir, "--format", "json", "--samples",
                          "200")
    assert json.loads(json_out)["notes"]  # JSON keeps its notes inside


def test_a_reason_in_place_of_an_interval_wraps_instead_of_pushing_columns_out(
        monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from toolkit.cli.common import print_table

    monkeypatch.setenv("COLUMNS", "80")
    reason = "0.000 [no variation between cases: no interval]"
    frame = pl.DataFrame({"run_id": ["sim/strong", "sim/skill-0.45"], "f1": ["0.989 [0.985, 0.992]"] * 2,
                          "severe_omission_case_rate": [reason, "0.667 [0.000, 1.000]"],
                          "severe_commission_case_rate": [reason, "0.333 [-0.120, 1.000]"]})
    print_table(frame, "harms")
    out = capsys.readouterr().out
    assert "not shown" not in out and {"omission", "commission"} <= header_words(out)
    assert "[-0.120, 1.000]" in out  # numbers are never cut; the reason wraps
    assert max(len(line) for line in out.splitlines()) <= 80
