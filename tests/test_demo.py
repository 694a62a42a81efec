"""The demo writes into the default store of where the user stands, replaces only the runs it collected
itself, refuses (one line, naming the flag) to replace anyone else's run of the same id, and every
command says which store it read when it finds no runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.collect_support import bedside
from toolkit.collect.demo import DEMO_MODELS, run_demo
from toolkit.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.reference import export_samples, import_reference
from toolkit.store import Store
from toolkit.tables import RUN_TABLES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference-format result file (a demo run's first answer sample exported), to import as someone else's run."""
    folder = tmp_path_factory.mktemp("ref")
    store, _, _ = run_demo(str(folder / "source"), latency_ms=0)
    [(rows, _), *_] = export_samples(store, "sim/weak", folder / "theirs.jsonl")
    return rows


def run_rows(store: Store, run_id: str) -> dict[str, pl.DataFrame]:
    """Every stored row of a run, in a stable order (to prove it was left as it was)."""
    return {t: (frame := store.read(t, [run_id])).sort(frame.columns) for t in RUN_TABLES}


def assert_same(before: dict[str, pl.DataFrame], after: dict[str, pl.DataFrame]) -> None:
    for table, frame in before.items():
        assert frame.height > 0 or table == "decisions"
        assert after[table].equals(frame), table


def collect_by_hand(store_dir: Path, run_id: str, model: str) -> None:
    with SimServer(SimConfig()) as sim:
        code, _, err = bedside("run", "--answer-model", model, "--run-id", run_id, "--judge-model", "sim/judge",
                               "--base-url", sim.base_url, "--store", store_dir, "--limit", "3", "--progress", "none")
    assert code == 0, err


def test_the_demo_leaves_imported_and_collected_runs_alone(tmp_path: Path, reference_file: Path) -> None:
    store_dir = tmp_path / "store"
    store = Store.open(store_dir)
    import_reference(store, reference_file, load_dataset(None), run_id="theirs")
    collect_by_hand(store_dir, "mine", "sim/medium")
    before = {r: run_rows(store, r) for r in ("theirs", "mine")}

    for attempt in (1, 2):
        code, out, err = bedside("demo", "--store", store_dir, "--progress", "none")
        assert code == 0, err
        assert ("replaced the demo's earlier runs sim/strong, sim/medium, sim/weak, sim/skill-0.45" in out) \
            == (attempt == 2)
        assert set(store.run_ids()) == {"theirs", "mine", *DEMO_MODELS}
        for run_id, rows in before.items():
            assert_same(rows, run_rows(store, run_id))
        board = [line for line in out.splitlines() if line.startswith("│")]
        assert len(board) == 4 and not any("theirs" in line or "mine" in line for line in board)


def test_a_run_of_a_demo_id_that_the_demo_did_not_collect_is_refused(tmp_path: Path, reference_file: Path) -> None:
    imported, collected = tmp_path / "imported", tmp_path / "collected"
    import_reference(Store.open(imported), reference_file, load_dataset(None), run_id="sim/strong")
    collect_by_hand(collected, "sim/medium", "sim/medium")  # same id and model as the demo's, by hand
    for store_dir, run_id, origin in ((imported, "sim/strong", "imported from"),
                                      (collected, "sim/medium", "collected, answer model 'sim/medium'")):
        store = Store.open(store_dir)
        before = run_rows(store, run_id)
        code, out, err = bedside("demo", "--store", store_dir, "--progress", "none")
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert f"run {run_id!r} was not collected by the demo ({origin}" in err and "--replace" in err
        assert store.run_ids() == [run_id] and out == ""
        assert_same(before, run_rows(store, run_id))

    code, out, err = bedside("demo", "--store", imported, "--replace", "--progress", "none")
    assert code == 0, err
    assert "replaced the demo's earlier runs sim/strong in" in out
    store = Store.open(imported)
    assert set(store.run_ids()) == set(DEMO_MODELS) and store.run("sim/strong")["source"] == "collected"


def test_demo_then_compare_work_from_where_the_user_stands(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("BEDSIDE_STORE", "BEDSIDE_DATASET")}
    env["COLUMNS"] = "80"
    demo = subprocess.run([sys.executable, "-m", "toolkit", "demo", "--progress", "none"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
    # three cases a benchmark: the leaderboard's reference interval under-covers there, and the demo says so
    assert "smallest here: 3): percentile intervals under-cover there" in demo.stderr
    assert f"store: {tmp_path / 'data' / 'results'}" in demo.stdout
    assert "next:  bedside compare --all   (paired comparisons, ranks)" in demo.stdout  # no --store needed here
    assert set(Store.open(tmp_path / "data" / "results").run_ids()) == set(DEMO_MODELS)
    compare = subprocess.run([sys.executable, "-m", "toolkit", "compare", "--all", "--section", "leaderboard"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    assert sum("sim/" in line for line in compare.stdout.splitlines() if line.startswith("│")) == 4


def test_no_runs_and_help_name_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEDSIDE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    for command in (("compare", "--all"), ("summary", "--all"), ("items", "--all"), ("harms", "--all")):
        code, out, err = bedside(*command)
        assert code == 1 and out == "", err
        assert err.startswith(f"bedside: error: {tmp_path / 'data' / 'results'}: the store has no runs"), err
        assert "$BEDSIDE_STORE, else ./data/results under the current directory" in err
    for command in ("compare", "summary", "items", "harms", "agreement", "demo", "run", "judge", "import", "export",
                    "sql"):
        code, out, _ = bedside(command, "--help")
        text = " ".join(out.split())
        assert code == 0 and "(default: $BEDSIDE_STORE, else ./data/results under the current directory)" in text
        assert f"[now:{tmp_path / 'data' / 'results'}]" in "".join(out.split()), command  # help wraps long paths
    monkeypatch.setenv("BEDSIDE_STORE", str(tmp_path / "elsewhere"))
    code, _, err = bedside("compare", "--all")
    assert code == 1 and err.startswith(f"bedside: error: {tmp_path / 'elsewhere'}: the store has no runs")


def test_the_demo_refuses_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, out, err = bedside("demo", "--store", tmp_path / "mine", "--progress", "none")
    assert code == 1 and "not part of a bedside store" in err and "--store" in err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_the_demo_asks_each_case_three_times_and_its_answers_differ(demo_store: Path) -> None:
    """Issue 19 item 8: K = 3 answers per case from a provider with an answer spread, so worst-at-k falls below the
    mean and the answers' part of the variance is real, while the four models still rank in skill order."""
    store = Store.open(demo_store)
    samples = store.read("sample_scores")
    per_run = samples.group_by("run_id").agg(pl.len().alias("rows"), pl.col("case_id").n_unique().alias("cases"),
                                             pl.col("sample").n_unique().alias("samples"))
    assert sorted(per_run.iter_rows()) == sorted((run, 90, 30, 3) for run in DEMO_MODELS)
    import toolkit as bs

    budget = bs.variance_components(store, list(DEMO_MODELS))
    worst = budget.worst_at_k.filter(pl.col("benchmark") == "overall")
    for run in DEMO_MODELS:
        curve = worst.filter(pl.col("run_id") == run).sort("k")["value"].to_list()
        assert len(curve) == 3 and curve[0] > curve[1] > curve[2], (run, curve)
    shares = budget.components.filter(pl.col("benchmark") == "overall", pl.col("component") == "answer+judge")
    assert shares.height == 4 and shares["share"].min() > 0.05
    board = bs.compare(store, list(DEMO_MODELS)).leaderboard["run_id"].to_list()
    assert board == ["sim/strong", "sim/medium", "sim/skill-0.45", "sim/weak"]


def test_the_leaderboard_lines_name_their_interval(demo_store: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli.table import print_table
    from toolkit.collect.demo import leaderboard
    from toolkit.summary import summarize

    board = leaderboard(Store.open(demo_store), list(DEMO_MODELS))
    summaries = summarize(Store.open(demo_store), list(DEMO_MODELS))
    assert board["ci_method"].to_list() == ["percentile bootstrap"] * 4  # the reference's, as `summary` shows
    assert board["ci95_low"].to_list() == [summaries[r]["overall_ci95"][0] for r in board["run"]]
    monkeypatch.setenv("COLUMNS", "120")
    print_table(board, "Leaderboard", optional=("answer_model", "judge_model"))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert len(lines) == 4 and all("percentile bootstrap" in line for line in lines), lines
