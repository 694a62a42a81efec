"""The stored score table ``reliability_scores`` (worst-at-k and pass^k per run x benchmark x k): computed by
``toolkit.scoring.reliability_scores`` with each commit, shown by ``bedside sql`` and the ``db`` file, equal
to ``bedside variance``'s point values and to a brute force over every k-subset of ``sample_scores``."""

from __future__ import annotations

import itertools
import json
import math

import polars as pl
import pytest

from tests.analysis_sim import write_run
from tests.samples_support import sample_decisions, write_samples
from tests.test_cli_process import bedside_process
from toolkit.score_tables import store_scores
from toolkit.store import Store, transaction


@pytest.fixture(autouse=True)
def scorer():
    before = list(transaction._SCORERS)
    store_scores()
    yield
    transaction._SCORERS[:] = before


def _brute(samples: pl.DataFrame, threshold: float = 1.0) -> dict[tuple, tuple[float, float]]:
    """(run, benchmark or None, k) -> (worst-at-k, pass^k): every k-subset of a case's answers enumerated."""
    per_bench: dict[tuple, list[tuple[float, float]]] = {}
    for (run, bench, _), group in samples.group_by("run_id", "benchmark", "case_id"):
        scores = group["score"].to_list()
        for k in range(1, len(scores) + 1):
            subsets = list(itertools.combinations(scores, k))
            worst = sum(min(s) for s in subsets) / len(subsets)
            share = sum(all(x >= threshold - 1e-12 for x in s) for s in subsets) / len(subsets)
            per_bench.setdefault((run, bench, k), []).append((worst, share))
    out = {key: (sum(w for w, _ in v) / len(v), sum(p for _, p in v) / len(v)) for key, v in per_bench.items()}
    for run, k in {(r, k) for r, _, k in out}:
        names = [b for r, b, kk in out if r == run and kk == k]
        out[run, None, k] = (sum(out[run, b, k][0] for b in names) / len(names),
                             sum(out[run, b, k][1] for b in names) / len(names))
    return out


def _sql(store: Store, query: str) -> list[dict]:
    done = bedside_process(["sql", "--format", "json", "--store", str(store.root), query])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_view_equals_variance_and_a_brute_force_over_k_subsets(store: Store, sample_dataset) -> None:
    write_samples(store, sample_dataset, "k3", sample_decisions(sample_dataset, "k3", 3, passes=2))
    write_run(store, sample_dataset, "once", 0.4, 5)
    cases = sample_dataset.cases.height
    rows = _sql(store, "SELECT * FROM reliability_scores ORDER BY run_id, benchmark NULLS LAST, k")
    assert [r["k"] for r in rows if r["run_id"] == "k3" and r["benchmark"] is None] == [1, 2, 3]
    assert [r["k"] for r in rows if r["run_id"] == "once" and r["benchmark"] is None] == [1]
    samples = pl.DataFrame(_sql(store, "SELECT run_id, benchmark, case_id, sample, score FROM sample_scores"))
    brute = _brute(samples)
    assert len(brute) == len(rows)
    for row in rows:
        worst, share = brute[row["run_id"], row["benchmark"], row["k"]]
        assert abs(row["worst_at_k"] - worst) <= 1e-12 and abs(row["pass_k"] - share) <= 1e-12
        assert row["threshold"] == 1.0
        assert row["cases"] == (cases if row["benchmark"] is None else
                                samples.filter((pl.col("run_id") == row["run_id"])
                                               & (pl.col("benchmark") == row["benchmark"]))["case_id"].n_unique())
    done = bedside_process(["variance", "--run", "k3", "--format", "json", "--samples", "100",
                            "--store", str(store.root)])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    view = {(r["benchmark"] or "overall", r["k"]): r for r in rows if r["run_id"] == "k3"}
    for name, column in (("worst_at_k", "worst_at_k"), ("pass_k", "pass_k")):
        assert len(out[name]) == len(view)
        for entry in out[name]:
            assert abs(view[entry["benchmark"], entry["k"]][column] - entry["value"]) <= 1e-12
    # k = 1 is the run's overall mean, as the leaderboard has it
    overall = _sql(store, "SELECT run_id, overall_macro_mean FROM run_summary")
    for run, mean in ((r["run_id"], r["overall_macro_mean"]) for r in overall):
        assert abs(view_k1(rows, run) - mean) <= 1e-12


def view_k1(rows: list[dict], run: str) -> float:
    return next(r["worst_at_k"] for r in rows if r["run_id"] == run and r["benchmark"] is None and r["k"] == 1)


def test_a_partly_sampled_run_averages_the_cases_that_have_k_answers(store: Store, sample_dataset) -> None:
    decisions = sample_decisions(sample_dataset, "p", 2)
    first = sample_dataset.cases["case_id"][0]
    write_samples(store, sample_dataset, "p", decisions.filter((pl.col("sample") == 0) | (pl.col("case_id") == first)))
    stored = store.read("reliability_scores", ["p"])
    two = stored.filter(pl.col("k") == 2)
    assert two.height == 1 and two["cases"].to_list() == [1]  # one benchmark has a case with 2 answers; no macro
    one = stored.filter((pl.col("k") == 1) & pl.col("benchmark").is_null())
    assert one["cases"].to_list() == [sample_dataset.cases.height]


def test_a_run_stored_before_the_table_has_its_rows_computed(store: Store, sample_dataset, tmp_path) -> None:
    import duckdb

    from toolkit import write_database
    from toolkit.score_tables import score_commits

    def older(batch):  # the scorer of a version before sample_scores and reliability_scores
        return [None if out is None else {t: f for t, f in out.items()
                                          if t not in ("sample_scores", "reliability_scores")}
                for out in score_commits(batch)]

    transaction._SCORERS[:] = [older]
    write_samples(store, sample_dataset, "old", sample_decisions(sample_dataset, "old", 2))
    assert store.read("reliability_scores", ["old"]).height == 0
    cases = sample_dataset.cases.height
    store_scores()
    write_samples(store, sample_dataset, "new", sample_decisions(sample_dataset, "new", 2, seed=3))
    rows = _sql(store, "SELECT run_id, count(*) AS n FROM reliability_scores GROUP BY run_id ORDER BY run_id")
    benchmarks = sample_dataset.cases["benchmark"].n_unique()
    assert rows == [{"run_id": "new", "n": 2 * (benchmarks + 1)}, {"run_id": "old", "n": 2 * (benchmarks + 1)}]
    # a query naming only a later score table has the old run's rows computed too
    samples = _sql(store, "SELECT run_id, count(*) AS n FROM sample_scores GROUP BY run_id ORDER BY run_id")
    assert samples == [{"run_id": "new", "n": 2 * cases}, {"run_id": "old", "n": 2 * cases}]
    path = tmp_path / "bench.duckdb"
    write_database(store, path)
    with duckdb.connect(str(path), read_only=True) as con:
        got = con.execute("SELECT run_id, k, worst_at_k FROM reliability_scores WHERE benchmark IS NULL "
                          "ORDER BY run_id, k").fetchall()
    assert [(r, k) for r, k, _ in got] == [("new", 1), ("new", 2), ("old", 1), ("old", 2)]
    assert all(math.isfinite(w) for _, _, w in got)
