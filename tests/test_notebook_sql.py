"""notebooks/04-sql.ipynb: each one-query answer equals the same question answered another way, in
polars over the toolkit's own frames (per_case, analyse_items, the latest valid decisions).

It runs on two stores: the demo's, and one whose imported run has a case graded twice (an earlier
reply meeting every item, then the reply that counts), where reading every reply instead of each
pass's latest valid one gives other answers."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.notebook_support import ExecutedNotebook, executed
from toolkit.selection import latest_valid_decisions

NAME = "04-sql.ipynb"


def regraded_store(demo_store: Path, folder: Path) -> Path:
    """sim/strong and sim/weak imported from their reference files; in sim/weak's, a case missing an
    item both runs miss gets an earlier row that meets every item (the reference keeps the last row)."""
    source, target = bs.Store.open(demo_store), bs.Store.open(folder / "store")
    runs = bs.read_runs(source, ["sim/strong", "sim/weak"])
    item_runs = bs.analyse_items(runs).item_runs.filter(pl.col("points") > 0)
    case = (item_runs.group_by("case_id", "item_id").agg(pl.col("matched").max())
            .filter(pl.col("matched") == 0).sort("case_id", "item_id")["case_id"][0])
    dataset = bs.load_dataset(None)
    for run_id in ("sim/strong", "sim/weak"):
        path = folder / f"{run_id.replace('/', '-')}.jsonl"
        written = bs.export_samples(source, run_id, path)  # the demo's three samples: one file each
        path = written[0][0]
        if run_id == "sim/weak":
            lines = path.read_text(encoding="utf-8").splitlines()
            at = next(i for i, line in enumerate(lines) if json.loads(line)["case_id"] == case)
            row = json.loads(lines[at])
            earlier = dict(row, decisions=[dict(d, matched=True) for d in row["decisions"]])
            lines.insert(at, json.dumps(earlier, ensure_ascii=False))
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        bs.import_reference(target, path, dataset, run_id=run_id)
    return folder / "store"


@pytest.fixture(scope="module", params=["demo", "regraded"])
def store_path(request: pytest.FixtureRequest, demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if request.param == "demo":
        return demo_store
    return regraded_store(demo_store, tmp_path_factory.mktemp("regraded"))


@pytest.fixture(scope="module")
def shown(store_path: Path) -> ExecutedNotebook:
    return executed(NAME, store_path)


@pytest.fixture(scope="module")
def data(store_path: Path):
    store = bs.Store.open(store_path)
    return bs.read_runs(store, store.run_ids())


def is_demo(data) -> bool:
    return data.runs.height == 4


def test_it_lists_the_tables_and_the_derived_relations(shown: ExecutedNotebook) -> None:
    names = {r["name"] for r in shown.table("relations")}
    assert {"runs", "answers", "judgments", "decisions", "cases", "rubric_items", "pass_scores", "case_scores",
            "benchmark_scores", "run_summary"} <= names


def test_results_continue_in_polars(shown: ExecutedNotebook, data) -> None:
    rows = shown.table("to-polars")
    assert len(rows) == 6 and set(rows[0]) == {"benchmark", "case_id", *data.runs["run_id"]}


def test_worst_benchmark_per_model_equals_polars(shown: ExecutedNotebook, data) -> None:
    means = bs.per_case(data).group_by("run_id", "benchmark").agg(pl.col("score").mean().round(12))
    worst = (means.sort("score", "benchmark").group_by("run_id", maintain_order=True).first()
             .sort("score", "run_id"))
    rows = shown.table("worst-benchmark")
    assert [(r["run_id"], r["worst_benchmark"]) for r in rows] == list(zip(worst["run_id"], worst["benchmark"]))
    assert [float(r["mean"]) for r in rows] == pytest.approx(worst["score"].to_list(), abs=1e-6)
    assert len(rows) == data.runs.height


def test_items_every_model_misses_equal_the_item_analysis(shown: ExecutedNotebook, data) -> None:
    per_run = bs.analyse_items(data).item_runs.filter(pl.col("points") > 0)
    runs = data.runs.height
    missed = (per_run.group_by("item_id").agg(pl.col("matched").max().alias("best"), pl.len().alias("runs"))
              .filter(pl.col("best") == 0, pl.col("runs") == runs))
    rows = shown.table("missed-by-all")
    assert sorted(r["item_id"] for r in rows) == sorted(missed["item_id"].to_list())
    assert rows, "the demo has items no simulated model meets"
    texts = dict(zip(data.rubric_items["item_id"], data.rubric_items["text"]))
    for row in rows:
        assert int(row["runs"]) == runs and float(row["points"]) > 0
        assert texts[row["item_id"]].startswith(row["text"].rstrip("…"))


def test_runs_whose_judge_flipped_equal_polars(shown: ExecutedNotebook, data) -> None:
    repeated = (latest_valid_decisions(data.judgments, data.decisions)
                .group_by("run_id", "judge_model", "case_id", "sample", "item_id")  # one answer's passes
                .agg(pl.len().alias("passes"), pl.col("matched").n_unique().alias("answers"))
                .filter(pl.col("passes") > 1))
    expected = (repeated.group_by("run_id", "judge_model")
                .agg((pl.col("answers") > 1).sum().alias("flipped"), pl.len().alias("again"))
                .filter(pl.col("flipped") > 0)
                .sort(["flipped", "run_id", "judge_model"], descending=[True, False, False]))
    rows = shown.table("judge-disagreed")
    assert [(r["run_id"], r["judge_model"], int(r["items_flipped"]), int(r["items_judged_again"])) for r in rows] == \
        list(zip(expected["run_id"], expected["judge_model"], expected["flipped"], expected["again"]))
    if is_demo(data):  # the demo's noisy judge grades every run twice and slips: the question has an answer
        assert {r["judge_model"] for r in rows} == {"sim/judge-noisy"} and len(rows) == 4
    else:  # one pass each: a case graded twice is a re-ask, not a second opinion
        assert rows == []


def test_passes_per_run_and_judge(shown: ExecutedNotebook, data) -> None:
    ok = data.judgments.filter(pl.col("error").is_null())
    expected = ok.group_by("run_id", "judge_model").agg(pl.col("judge_pass").n_unique()).sort("run_id", "judge_model")
    rows = shown.table("passes")
    assert [(r["run_id"], r["judge_model"], int(r["passes"])) for r in rows] == list(expected.iter_rows())
