"""``bedside report`` / ``write_report``: sections and anchors, numbers equal to the analyses, hostile text
escaped in HTML and Markdown, CSV tables, nothing external, byte-for-byte determinism, --baseline, bad
flags, a one-run store."""

from __future__ import annotations

import csv
from markupsafe import escape
import re
from pathlib import Path

import polars as pl
import pytest

from tests.report_store import EVIL_RUN, IMG, SCRIPT, build
from toolkit.analysis import CompareOptions, HarmOptions, ResampleSettings, compare, harms
from toolkit.report.model import interval
from toolkit.selection import read_runs
from toolkit.cli import main
from toolkit.report import ReportOptions, write_report
from toolkit.report.build import GENERATED_PREFIX
from toolkit.report.model import case_anchor, run_anchors
from toolkit.report.render import fence, md_escape

def esc(text: str) -> str:
    return str(escape(text))


SAMPLES = 400  # enough for percentile intervals, fast
OPTIONS = ReportOptions(samples=SAMPLES, seed=7)


@pytest.fixture(scope="module")
def store(tmp_path_factory, sample_dataset):
    return build(tmp_path_factory.mktemp("report") / "store", sample_dataset)


@pytest.fixture(scope="module")
def report(store, tmp_path_factory):
    return write_report(store, None, tmp_path_factory.mktemp("out") / "r", OPTIONS)


def _page(report) -> str:
    return report.html.read_text(encoding="utf-8")


def test_sections_runs_and_cases_have_anchors(report, store):
    page = _page(report)
    for anchor in ("summary", "reproducibility", "leaderboard", "benchmarks", "pairwise", "items", "harms", "judges",
                   "differ", "cases", "method", "warnings"):
        assert f'<section id="{anchor}">' in page, anchor
        assert f'href="#{anchor}"' in page  # in the table of contents
    for run_id, anchor in run_anchors(store.run_ids()).items():
        assert f'id="{anchor}"' in page and f'href="#{anchor}"' in page, run_id
    case_ids = store.read("cases")["case_id"].to_list()
    for case_id in case_ids:
        assert f'id="{case_anchor(case_id)}"' in page
    # every in-page link points at an id that exists
    all_ids = re.findall(r'id="([^"]+)"', page)
    assert len(all_ids) == len(set(all_ids)), "duplicate anchors"
    ids = set(all_ids)
    targets = {t for t in re.findall(r'href="#([^"]+)"', page)}
    assert targets <= ids, targets - ids


def test_reproducibility_block_says_what_was_compared(report, store):
    page = _page(report)
    sha = store.read("runs")["dataset_sha256"][0]
    for text in ("bedside-bench-grading-v1", sha, "bedside-bench-sample", f"{SAMPLES} samples, seed 7",
                 "judge-x (1,2)", "28 / 2 / 0", "collected", "1.0 / 0.0", "2025-01-01"):
        assert esc(text) in page, text
    command = f"bedside report --all --samples {SAMPLES} --seed 7 --store {Path(store.root).resolve()}"
    assert esc(command) in page
    if callable(getattr(store, "version", None)):  # a versioned (Delta Lake) store names its version
        assert f"<dt>store version</dt><dd>{store.version()}</dd>" in page


def test_numbers_equal_the_analysis_frames(report, store):
    page = _page(report)
    cmp = compare(store, store.run_ids(), CompareOptions(resamples=ResampleSettings(SAMPLES, 7)))
    for r in cmp.leaderboard.iter_rows(named=True):
        cell = esc(f"{r['overall']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]")
        assert cell in page, r["run_id"]
    for r in cmp.pairwise.iter_rows(named=True):
        assert esc(f"{r['delta']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]") in page
    data = read_runs(store, store.run_ids(), texts=False)
    harm = harms(data, HarmOptions(resamples=ResampleSettings(SAMPLES, 7))).filter(pl.col("scope") == "both")
    for r in harm.filter(pl.col("metric").is_in(["f1", "severe_rate", "recall"])).iter_rows(named=True):
        assert esc(interval(r["value"], r["ci_low"], r["ci_high"])) in page, (r["run_id"], r["metric"])
    board = pl.read_csv(report.directory / "tables" / "leaderboard.csv")
    assert board["run_id"].to_list() == cmp.leaderboard["run_id"].to_list()
    assert board["overall"].to_list() == pytest.approx(cmp.leaderboard["overall"].to_list(), rel=1e-12)
    pairs = pl.read_csv(report.directory / "tables" / "pairwise.csv")
    assert pairs["p_holm"].to_list() == pytest.approx(cmp.pairwise["p_holm"].to_list(), rel=1e-12)
    assert "mdd80" in pairs.columns and (pairs["mdd80"] > 0).all()


def test_every_table_and_figure_has_its_csv(report):
    page = _page(report)
    tables = {p.stem for p in (report.directory / "tables").iterdir()}
    for key in re.findall(r'id="table-([^"]+)"', page):
        assert key in tables, key
    for png in (report.directory / "figures").iterdir():
        assert f"figure_{png.stem}" in tables, png.name
        assert f'id="fig-{png.stem}"' in page
    assert len(report.figures) >= 8  # a "$" in a run id does not stop a figure (TeX math is off)
    with open(report.directory / "tables" / "cases.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert len(rows) == 31 and {"alpha", "beta", EVIL_RUN} <= set(rows[0])


def test_hostile_text_is_inert_in_html(report):
    page = _page(report)
    body = page.split("</style>", 1)[1]
    assert "<script" not in page.lower()
    assert "<img src=x" not in body and "onerror=" not in body.replace("onerror=&#34;", "").replace(
        "onerror=&quot;", "")
    assert esc(SCRIPT) in body and esc(IMG) in body
    assert esc(EVIL_RUN) in body
    # the only <img> elements are the embedded figures
    assert all(src.startswith("data:image/png;base64,") for src in re.findall(r'<img src="([^"]*)"', body))


def _outside_fences(markdown: str) -> str:
    return re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", markdown, flags=re.S | re.M)


def test_hostile_text_is_inert_in_markdown(report):
    text = report.markdown.read_text(encoding="utf-8")
    outside = _outside_fences(text)
    assert "<script" not in outside.lower() and "<img" not in outside.lower()
    assert "window.__pwned" in text  # the payload is shown (escaped or fenced), not dropped
    assert "&lt;img src=x" in outside
    assert f"{SCRIPT} then {IMG}" in text  # inside a fence, verbatim
    assert "![" in text and "](figures/leaderboard.png)" in text and "`tables/figure_leaderboard.csv`" in text
    # tables are GitHub tables: a header row, then its separator on the next line, one row per line
    lines = text.splitlines()
    separators = [i for i, line in enumerate(lines) if line.startswith("|---|")]
    assert len(separators) >= 8 and all(lines[i - 1].startswith("| ") for i in separators)
    assert sum(line.startswith("| alpha |") for line in lines) >= 2


def test_markdown_helpers():
    assert md_escape("<b>x</b> | *y* [z](u)\nnext") == r"&lt;b&gt;x&lt;/b&gt; \| \*y\* \[z\](u) next"
    block = fence("a ```` b")
    assert block.startswith("`````text\n") and block.endswith("\n`````")


def test_no_external_address_is_referenced(report):
    page = _page(report)
    assert not re.search(r"""(src|href|action|poster)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", page, re.I) and "@import" not in page
    assert "Content-Security-Policy" in page


def _masked(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            lines = [b"<generated>" if GENERATED_PREFIX.encode() in line else line for line in data.split(b"\n")]
            out[str(path.relative_to(root))] = b"\n".join(lines)
    return out


def test_same_store_same_bytes_but_the_generated_line(report, store, tmp_path):
    again = write_report(store, None, tmp_path / "again", OPTIONS)
    first, second = _masked(report.directory), _masked(again.directory)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], name
    for path in (report.html, report.markdown):
        assert sum(GENERATED_PREFIX in line for line in path.read_text().splitlines()) == 1


def test_baseline_compares_every_run_against_it(store, tmp_path, capsys):
    out = tmp_path / "base"
    code = main(["report", "--all", "--baseline", "beta", "--store", str(store.root), "--out", str(out),
                 "--samples", str(SAMPLES), "--no-figures"])
    assert code == 0, capsys.readouterr().err
    # The run with failed cases is not ranked (the comparison ranks like with like): one pair, alpha vs beta,
    # as the comparison oriented it, with the same Holm p in every table.
    pairs = pl.read_csv(out / "tables" / "pairwise.csv")
    assert pairs.height == 1 and set(pairs["run_b"]) == {"beta"} and set(pairs["run_a"]) == {"alpha"}
    full = pl.read_csv(out / "tables" / "pairwise_all.csv").filter(pl.col("benchmark") == "overall")
    assert full["p_holm"].to_list() == pytest.approx(pairs["p_holm"].to_list(), rel=1e-12)
    page = (out / "index.html").read_text()
    assert "Against the baseline beta" in page and "--baseline beta" in page
    assert "not ranked: " + esc(EVIL_RUN) in page
    assert not (out / "figures").exists() or not any((out / "figures").iterdir())


@pytest.mark.parametrize("args, message", [
    (["--run", "nope"], "no run 'nope'"),
    (["--all", "--baseline", "nope"], "--baseline 'nope' is not one of the selected runs"),
    (["--all", "--run", "alpha"], "give --run or --all, not both"),
    ([], "choose runs with --run"),
    (["--all", "--samples", "10"], "--samples must be >= 100"),
])
def test_bad_flags_give_one_line_and_write_nothing(store, tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    code = main(["report", *args, "--store", str(store.root), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_full_disk_is_one_line_naming_where_and_writes_nothing(store, tmp_path, capsys, monkeypatch):
    import polars.exceptions

    import toolkit.text

    def full(*_args, **_kwargs):  # what polars raises when the disk fills under it
        raise polars.exceptions.ComputeError("No space left on device (os error 28)")
    monkeypatch.setattr(toolkit.text, "write_csv", full)
    out = tmp_path / "full"
    code = main(["report", "--all", "--store", str(store.root), "--out", str(out), "--no-figures"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and f"no space left on {tmp_path}" in err[0], err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_refuses_to_replace_a_directory_that_is_not_a_report(store, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code = main(["report", "--all", "--store", str(store.root), "--out", str(out), "--no-figures"])
    assert code == 1 and "not a report directory" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_one_run_store_and_default_out_dir(tmp_path, sample_dataset, monkeypatch, capsys):
    store = build(tmp_path / "solo", sample_dataset, runs=1)
    monkeypatch.chdir(tmp_path)
    code = main(["report", "--all", "--store", str(store.root), "--samples", str(SAMPLES), "--no-figures"])
    assert code == 0, capsys.readouterr().err
    page = (tmp_path / "reports" / "solo" / "index.html").read_text()
    assert "A single run: there is no pair to compare." in page
    assert '<section id="judges">' not in page  # one judge pass: no judge section
    assert "alpha ranks first" in page


def test_demo_writes_its_report_and_prints_the_path(tmp_path, capsys):
    code = main(["demo", "--store", str(tmp_path / "store"), "--progress", "none"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(l for l in out.splitlines() if l.startswith("report: "))
    page = Path(line.split()[1])
    assert page == tmp_path / "store-report" / "index.html" and page.is_file()
    text = page.read_text()
    assert "Demo: simulated models on the bundled sample" in text and "sim/strong" in text
    assert len(list((page.parent / "figures").iterdir())) >= 8


def test_runs_the_comparison_left_out_reach_no_section(tmp_path) -> None:
    """A run of another dataset is left out of the comparison: its harms, items and judge rows must not
    appear in the report either (they were computed over every run given)."""
    import json

    from tests.analysis_sim import write_run
    from toolkit.cli import main
    from toolkit.store import Store
    from toolkit.dataset import load_dataset

    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    for i in range(3):
        write_run(store, dataset, f"same{i}", skill=0.3 * i, seed=i, created=i, passes=2)
    subset = tmp_path / "subset.jsonl"  # another dataset: the sample without its last case
    subset.write_text("".join(json.dumps(c) + "\n" for c in dataset.raw_cases[:-1]), encoding="utf-8")
    write_run(store, load_dataset(subset), "other-data", skill=0.2, seed=8, created=6, passes=2)
    out = tmp_path / "report"
    assert main(["report", "--all", "--store", str(store.root), "--out", str(out), "--no-figures",
                 "--samples", "200"]) == 0
    tables = {p.name: p.read_text(encoding="utf-8") for p in (out / "tables").glob("*.csv")}
    assert any(name.startswith("harms") for name in tables) and any("same0" in text for text in tables.values())
    assert [name for name, text in tables.items() if "other-data" in text and not name.startswith("excluded")] == []
