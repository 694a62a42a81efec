"""Reference files as answer samples, through real ``bedside`` processes: ``import --as-samples`` makes one run of
several files (file i -> sample i), refuses files of different models in one line with nothing written, and
``export`` of that run writes one reference file per sample, each byte for byte the file it came from, so
exporting and importing again gives the same scores."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests import reference_model as rm
from tests.test_cli_process import bedside_process
from toolkit.dataset import load_dataset
from toolkit.reference import export_samples, import_reference
from toolkit.store import Store

CASES = 40


@pytest.fixture(scope="module")
def bench(shared_bench: Path):
    return shared_bench, load_dataset(str(shared_bench))


def _files(folder: Path, dataset, seeds=(1, 2, 3), models=("model-a",) * 3) -> list[Path]:
    """Reference result files of the first CASES cases, each its own draw (errors, retries, re-judged cases)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for seed, model in zip(seeds, models):
        path = folder / f"{model}-{seed}.jsonl"
        rm.write_rows(path, rm.make_rows(list(dataset.raw_cases[:CASES]), seed=seed, error_rate=0.2,
                                         answer_model=model))
        out.append(path)
    return out


def _import(store: Path, bench_dir: Path, files: list[Path], run_id: str = "r") -> "object":
    return bedside_process(["import", *map(str, files), "--run-id", run_id, "--as-samples", "--store", str(store),
                            "--dataset", str(bench_dir)])


def _scores(root: Path, run_id: str) -> dict[str, pl.DataFrame]:
    store = Store.open(root)
    return {t: store.read(t, [run_id]).drop("run_id").sort(store.read(t, [run_id]).columns[1:4])
            for t in ("sample_scores", "case_scores", "benchmark_scores")}


def test_files_import_as_samples_and_export_back_byte_for_byte(tmp_path: Path, bench) -> None:
    bench_dir, dataset = bench
    files = _files(tmp_path / "in", dataset)
    done = _import(tmp_path / "st", bench_dir, files)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported r: ")
    store = Store.open(tmp_path / "st")
    samples = store.read("sample_scores", ["r"])
    completed = [{json.loads(l)["case_id"] for l in f.read_text().splitlines() if "score" in json.loads(l)}
                 for f in files]
    assert samples.height == sum(len(c) for c in completed)
    for k, cases in enumerate(completed):
        assert set(samples.filter(pl.col("sample") == k)["case_id"]) == cases
    # Each sample's scores are those of its file imported alone.
    for k, path in enumerate(files):
        import_reference(store, path, dataset, f"alone{k}")
        want = store.read("case_scores", [f"alone{k}"]).select("case_id", "score").sort("case_id")
        got = samples.filter(pl.col("sample") == k).select("case_id", "score").sort("case_id")
        assert got.equals(want)
    # Export: one file per sample, each the file it came from, byte for byte.
    out = tmp_path / "out" / "r.jsonl"
    exported = bedside_process(["export", "--run", "r", "--out", str(out), "--store", str(tmp_path / "st")])
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.count("wrote ") == 3 and not out.exists()
    hint = exported.stdout.splitlines()[-1]
    assert hint.startswith("they import back as one run of 3 samples: bedside import ") and hint.endswith(
        " --run-id r --as-samples"), exported.stdout
    for k, path in enumerate(files):
        mine = tmp_path / "out" / f"r.sample{k}.jsonl"
        assert mine.read_bytes() == path.read_bytes()
        pairs = export_samples(store, f"alone{k}", tmp_path / "one" / "a.jsonl")
        assert len(pairs) == 1  # a single-sample run: one file, as export_reference writes it
        assert (tmp_path / "out" / f"r.sample{k}.summary.json").read_bytes() == pairs[0][1].read_bytes()
    # ... and importing the exported files again gives the same scores.
    again = _import(tmp_path / "st2", bench_dir, [tmp_path / "out" / f"r.sample{k}.jsonl" for k in range(3)])
    assert again.returncode == 0, again.stderr
    first, second = _scores(tmp_path / "st", "r"), _scores(tmp_path / "st2", "r")
    for table in first:
        assert first[table].equals(second[table]), table
    replaced = bedside_process(["import", *map(str, files), "--run-id", "r", "--as-samples", "--replace",
                                "--store", str(tmp_path / "st"), "--dataset", str(bench_dir)])
    assert replaced.returncode == 0 and replaced.stdout.startswith("replaced r: "), replaced.stderr


def test_files_of_different_models_are_refused_with_nothing_written(tmp_path: Path, bench) -> None:
    bench_dir, dataset = bench
    files = _files(tmp_path / "in", dataset, seeds=(1, 2), models=("model-a", "model-b"))
    done = _import(tmp_path / "st", bench_dir, files)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "answer_model 'model-b' differs from 'model-a'" in done.stderr
    assert Store.open(tmp_path / "st").run_ids() == []
    for table in ("answers", "decisions"):
        assert Store.open(tmp_path / "st").read(table).height == 0
    missing = bedside_process(["import", *map(str, files), "--as-samples", "--store", str(tmp_path / "st"),
                               "--dataset", str(bench_dir)])
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "--run-id" in missing.stderr
    one = _import(tmp_path / "st", bench_dir, files[:1])
    assert one.returncode != 0 and one.stderr.count("\n") == 1 and "two or more" in one.stderr


def test_export_reference_refuses_a_run_of_several_samples(tmp_path: Path, bench) -> None:
    """One reference file holds one answer per case: a run of several samples is export_samples' to write."""
    from toolkit.reference import export_reference

    bench_dir, dataset = bench
    done = _import(tmp_path / "st", bench_dir, _files(tmp_path / "in", dataset, seeds=(1, 2), models=("model-a",) * 2))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "r.jsonl"
    with pytest.raises(ValueError, match=r"run 'r' has 2 answer samples per case: .*export_samples"):
        export_reference(Store.open(tmp_path / "st"), "r", out)
    assert not out.exists()


def test_one_file_given_twice_is_refused_not_taken_for_two_samples(tmp_path: Path, bench) -> None:
    # The same answers twice would read as answers that never vary: worst-at-k flat, answer variance 0.
    from toolkit.reference import import_samples
    _, dataset = bench
    first, second = _files(tmp_path / "in", dataset, seeds=(1, 2))
    link = tmp_path / "in" / "link.jsonl"
    link.symlink_to(first)
    store = Store.open(tmp_path / "st")
    for paths in ([first, second, first], [first, tmp_path / "in" / ".." / "in" / first.name], [first, link]):
        with pytest.raises(ValueError, match="given twice"):
            import_samples(store, paths, dataset, "r")
    assert store.run_ids() == [] and store.read("answers").height == 0


def test_samples_that_cover_different_cases_are_told(tmp_path: Path, bench) -> None:
    # A case answered in one file only has one answer where others have three: its score averages fewer
    # answers, and worst-at-k counts it only up to k = 1. The import says so instead of passing it silently.
    bench_dir, dataset = bench
    files = _files(tmp_path / "in", dataset)
    lines = files[1].read_text().splitlines(keepends=True)
    dropped = sorted({json.loads(l)["case_id"] for l in lines})[:10]
    files[1].write_text("".join(l for l in lines if json.loads(l)["case_id"] not in dropped))
    completed = [{json.loads(l)["case_id"] for l in f.read_text().splitlines() if "score" in json.loads(l)}
                 for f in files]
    union, every = set().union(*completed), set.intersection(*completed)
    done = _import(tmp_path / "st", bench_dir, files)
    assert done.returncode == 0, done.stderr
    warnings = [l for l in done.stderr.splitlines() if "completed in every file" in l]
    assert warnings == [f"warning: run 'r': {len(every)} of {len(union)} cases completed in every file; the others "
                        f"have fewer answers (completed per file: {', '.join(str(len(c)) for c in completed)}): "
                        "a case's score is the mean of its answers, and worst-at-k and pass^k at k count only "
                        "cases with k answers"], done.stderr
