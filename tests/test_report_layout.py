"""The report leads with the answer: the summary and the leaderboard on the first 1280x800 screen, one
pairwise view, the cases folded away, words that follow the signs, every run in leaderboard order in every
table, one Holm p per pair across tables and figure data with --baseline, and missing glyphs said once."""

from __future__ import annotations

import polars as pl
import pytest

from tests.analysis_sim import write_run
from tests.report_browser import CHROMIUM, INSTALL_HINT, visit
from tests.test_cli_process import bedside_process
from toolkit.dataset import load_dataset
from toolkit.report import ReportOptions, write_report
from toolkit.report.words import _pair_sentence
from toolkit.store import Store

OPTIONS = ReportOptions(samples=300, seed=5)
# Store order, the alphabet and the leaderboard all disagree: "c-best" leads, "b-weak" trails.
RUNS = (("b-weak", -0.6, 1, ()), ("c-best", 1.2, 2, ()), ("a-mid", 0.3, 1, (("judge-y", 0.15),)))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    store, dataset = Store.open(tmp_path_factory.mktemp("layout") / "store"), load_dataset()
    for i, (run_id, skill, passes, extra) in enumerate(RUNS):
        write_run(store, dataset, run_id, skill=skill, seed=20 + i, created=i, passes=passes, extra_judges=extra)
    return store


@pytest.fixture(scope="module")
def report(store, tmp_path_factory):
    return write_report(store, None, tmp_path_factory.mktemp("out") / "r", OPTIONS)


def _first_seen(values: list) -> list:
    return list(dict.fromkeys(v for v in values if v is not None))


def test_every_table_lists_runs_in_leaderboard_order(report) -> None:
    tables = report.directory / "tables"
    board = pl.read_csv(tables / "leaderboard.csv")["run_id"].to_list()
    assert board == ["c-best", "a-mid", "b-weak"]
    checked = []
    for path in sorted(tables.glob("*.csv")):
        frame = pl.read_csv(path, infer_schema_length=0)
        for column in ("run_id", "row"):
            if column in frame.columns and frame.height:
                seen = [r for r in _first_seen(frame[column].to_list()) if r in board]  # not "(all runs)"
                assert seen == [r for r in board if r in seen], (path.name, seen)
                checked.append(path.stem)
    cases = pl.read_csv(tables / "cases.csv", infer_schema_length=0).columns
    assert [c for c in cases if c in board] == board
    assert {"harms", "items_runs", "judges", "judge_scores", "figure_harm_rates", "figure_precision_recall",
            "figure_judge_agreement", "figure_score_distributions"} <= set(checked)


def test_pairwise_numbers_appear_once_and_cases_are_folded(report) -> None:
    page = report.html.read_text(encoding="utf-8")
    assert 'id="fig-pairwise_forest"' in page and 'id="fig-win_delta_matrix"' not in page
    assert '<details class="all-cases">' in page and '<section id="versus">' in page
    assert page.index('<section id="leaderboard">') < page.index('<section id="reproducibility">')


def test_words_follow_the_sign() -> None:
    row = {"run_a": "sim/weak", "run_b": "sim/medium", "delta": -0.308, "ci_low": -0.47, "ci_high": -0.14,
           "p_value": 0.0002, "p_holm": 0.004, "n_cases": 30, "mdd80": 0.2}
    line = _pair_sentence(row)
    assert "sim/weak trails sim/medium by 0.308 [0.140, 0.470]" in line and "-0.308" not in line
    assert "leads sim/medium by 0.308" in _pair_sentence(row | {"run_a": "x", "delta": 0.308, "ci_low": 0.14,
                                                                 "ci_high": 0.47})


def test_baseline_gives_one_holm_p_per_pair_everywhere(store, tmp_path) -> None:
    out = write_report(store, None, tmp_path / "base", ReportOptions(samples=300, seed=5, baseline="a-mid"))
    page = out.html.read_text(encoding="utf-8")
    assert "trails a-mid by" in page and "leads a-mid by -" not in page
    seen: dict[tuple[str, str], set[float]] = {}
    for path in (out.directory / "tables").glob("*.csv"):
        frame = pl.read_csv(path)
        if {"run_a", "run_b", "p_holm"} <= set(frame.columns):
            if "benchmark" in frame.columns:
                frame = frame.filter(pl.col("benchmark") == "overall")
            for a, b, p in frame.select("run_a", "run_b", "p_holm").iter_rows():
                seen.setdefault(tuple(sorted((a, b))), set()).add(round(p, 12))
    assert {pair for pair in seen} == {("a-mid", "b-weak"), ("a-mid", "c-best")}
    assert all(len(ps) == 1 for ps in seen.values()), seen


def test_first_screen_holds_the_summary_and_the_leaderboard(report) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing. {INSTALL_HINT}")
    boxes = visit(report.html, """() => {
        const box = s => { const r = document.querySelector(s).getBoundingClientRect(); return [r.top, r.bottom]; };
        return {summary: box('#summary .summary'), table: box('#table-leaderboard table'),
                figure: box('#fig-leaderboard img')};
    }""", width=1280, height=800).checks
    assert boxes["summary"][1] <= 800 and boxes["table"][1] <= 800, boxes
    assert boxes["figure"][0] < 800, boxes


def test_missing_glyphs_are_said_once_not_warned(store, tmp_path) -> None:
    odd = Store.open(tmp_path / "odd")
    dataset = load_dataset()
    for i, run_id in enumerate(("run-\u0f00", "plain")):  # U+0F00 (Tibetan) is not in DejaVu Sans
        write_run(odd, dataset, run_id, skill=0.5 * i, seed=i, created=i)
    done = bedside_process(["report", "--all", "--store", str(odd.root), "--out", str(tmp_path / "r"),
                            "--samples", "200"])
    err = done.stderr
    assert done.returncode == 0, err
    assert "Glyph" not in err and "Warning" not in err, err
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert page.count("has no glyph for U+0F00") == 1 and "run ids &#39;run-\u0f00&#39;" in page


def test_dataset_given_at_collection_is_named(tmp_path, monkeypatch) -> None:
    """A checkout given with --dataset is recorded by the run and names its digest in the report."""
    import json
    import shutil

    from tests.collect_support import bedside
    from toolkit.dataset import sample_dataset_path
    from toolkit.sim import SimConfig, SimServer

    checkout = tmp_path / "my-bench"
    shutil.copytree(sample_dataset_path(), checkout)
    registry = json.loads((checkout / "registry.json").read_text(encoding="utf-8"))
    (checkout / "registry.json").write_text(json.dumps(registry | {"name": "my-bench", "version": "9.9"}),
                                            encoding="utf-8")
    case = next((checkout / "data").rglob("cases/*.json"))  # dropped: a digest the default sample lacks
    manifest = case.parent.parent / "manifest.json"
    listed = json.loads(manifest.read_text(encoding="utf-8"))
    listed["case_ids"] = [c for c in listed["case_ids"] if c != case.stem]
    listed["case_count"] = len(listed["case_ids"])
    manifest.write_text(json.dumps(listed), encoding="utf-8")
    case.unlink()
    monkeypatch.setenv("SIM_KEY", "sk-sim-0000000000000000")
    with SimServer(SimConfig(api_key="sk-sim-0000000000000000")) as sim:
        code, _, err = bedside("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url",
                               sim.base_url, "--api-key-env", "SIM_KEY", "--judge-base-url", sim.base_url,
                               "--judge-api-key-env", "SIM_KEY", "--dataset", checkout, "--store", tmp_path / "store",
                               "--smoke", "--timeout", "20", "--max-retries", "1")
    assert code == 0, err
    page = write_report(Store.open(tmp_path / "store"), None, tmp_path / "r", OPTIONS).html.read_text("utf-8")
    assert "my-bench 9.9" in page and "not named" not in page
    assert "No run is ranked" in page and "not ranked: sim/strong 1 case in 10 benchmarks" in page  # a smoke run


def test_method_notes_name_the_intervals_the_report_shows() -> None:
    # The leaderboard and benchmark intervals are compare's stratified t; the notes once called them a
    # shared bootstrap differing from summary's "by Monte-Carlo noise", and tied Holm to the rows shown.
    from types import SimpleNamespace

    from toolkit.report.words import method_notes

    two = SimpleNamespace(leaderboard=pl.DataFrame({"run_id": ["a", "b"]}))
    text = " ".join(method_notes(SimpleNamespace(items=None, harm=None, cmp=two, baseline=None), 10000, 42))
    assert "stratified t" in text and "Monte-Carlo" not in text
    assert "table shown" not in text and "never changes the family" in text


def test_summary_gives_the_reason_a_run_is_not_ranked(tmp_path) -> None:
    # A run with every benchmark but one case in each is not ranked: the summary must not say it lacks a benchmark.
    store, dataset = Store.open(tmp_path / "store"), load_dataset()
    cases = dataset.cases.sort("case_id")
    failed = frozenset(cases.filter(pl.int_range(pl.len()).over("benchmark") > 0)["case_id"].to_list())
    for i, (run_id, skill) in enumerate((("x-high", 1.0), ("y-low", -0.5))):
        write_run(store, dataset, run_id, skill=skill, seed=40 + i, created=i)
    write_run(store, dataset, "z-thin", skill=0.0, seed=45, created=3, failed=failed)
    page = write_report(store, None, tmp_path / "r", OPTIONS).html.read_text("utf-8")
    assert "not ranked: z-thin 1 case in 10 benchmarks" in page
    assert "do not cover every benchmark" not in page
