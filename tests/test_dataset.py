"""Loading, digest and validation of datasets; every bad input gives a file + field error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.dataset import DatasetError, digest, load_dataset, validate_dataset
from tests.conftest import SAMPLE

PUBLIC_SHA = "aa2791ba30fa0f7e7d2fce41afaa396c598eae5524658275ac6910ff87292ff1"


def test_public_split_digest_and_shape(public_dataset) -> None:
    assert public_dataset.sha256 == PUBLIC_SHA
    assert len(public_dataset.raw_cases) == 250
    assert public_dataset.rubric_items.height == 2199
    assert set(public_dataset.benchmarks.values()) == {25}
    zero_point = public_dataset.rubric_items.filter(points=0.0)["case_id"].n_unique()
    assert zero_point == 8


def test_load_order_is_registry_then_manifest(public_dataset, shared_bench: Path) -> None:
    registry = json.loads((shared_bench / "registry.json").read_text())
    expected = []
    for panel in registry["panels"]:
        expected += json.loads((shared_bench / panel["path"] / "manifest.json").read_text())["case_ids"]
    assert public_dataset.cases["case_id"].to_list() == expected
    assert public_dataset.cases["position"].to_list() == list(range(250))


def test_sample_is_valid_and_default() -> None:
    ds = load_dataset()
    assert ds.source == SAMPLE
    assert len(ds.benchmarks) == 10 and min(ds.benchmarks.values()) >= 2
    assert set(ds.cases["grading_method"]) == {"points_rubric", "f1_weighted_rubric"}
    safety = ds.cases.filter(grading_method="f1_weighted_rubric")
    assert safety["n_items"].min() >= 15
    assert ds.rubric_items.filter(points=0.0).height >= 1 and ds.rubric_items.filter(pl_points_negative()).height >= 1


def pl_points_negative():
    import polars as pl

    return pl.col("points") < 0


def test_case_file_formats_give_the_same_digest(tmp_path: Path, sample_dataset) -> None:
    cases = list(sample_dataset.raw_cases)
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text("".join(json.dumps(c) + "\n" for c in cases))
    as_json = tmp_path / "cases.json"
    as_json.write_text(json.dumps(cases))
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "cases.parquet"
    pq.write_table(pa.Table.from_pylist(cases), parquet)
    for path in (jsonl, as_json, parquet):
        assert load_dataset(path).sha256 == sample_dataset.sha256 == digest(cases)


def test_smoke_and_limit_selection(sample_dataset) -> None:
    smoke = sample_dataset.select(smoke=True)
    assert len(smoke) == 10
    firsts = sample_dataset.cases.group_by("benchmark", maintain_order=True).first()["case_id"].to_list()
    assert smoke == firsts
    assert sample_dataset.select(limit=4) == sample_dataset.cases["case_id"].to_list()[:4]
    assert len(sample_dataset.select(benchmarks=["safety_diagnostic"])) == sample_dataset.benchmarks["safety_diagnostic"]
    with pytest.raises(DatasetError, match="unknown benchmark"):
        sample_dataset.select(benchmarks=["nope"])


# -- bad inputs: a checkout copy broken one way at a time ---------------------

@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    shutil.copytree(SAMPLE, root)
    return root


def _first_case(root: Path, panel: str = "drug_safety") -> Path:
    manifest = json.loads((root / "data" / panel / "manifest.json").read_text())
    return root / "data" / panel / "cases" / f"{manifest['case_ids'][0]}.json"


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _break_prompt(c: dict) -> None:
    c["prompt"] += " changed"


def _dup_item(c: dict) -> None:
    c["rubric_items"].append(dict(c["rubric_items"][0]))


BAD = {
    "broken JSON": (lambda r: _first_case(r).write_text('{"case_id": '), "invalid JSON"),
    "missing field": (lambda r: _edit(_first_case(r), lambda c: c.pop("prompt")), "\"prompt\" is a required property"),
    "wrong item id": (lambda r: _edit(_first_case(r), _break_prompt), "should be"),
    "wrong points type": (lambda r: _edit(_first_case(r, "safety_diagnostic"),
                                          lambda c: c["rubric_items"][0].update(points=1.5)), "is not of type \"integer\""),
    "no positive item": (lambda r: _edit(_first_case(r), lambda c: [i.update(points=-1) for i in c["rubric_items"]]),
                         "at least one positive item"),
    "duplicate item": (lambda r: _edit(_first_case(r), _dup_item), "should be"),
    "non-UTF-8": (lambda r: _first_case(r).write_bytes(b'{"case_id": "\xff\xfe"}'), "not UTF-8"),
    "empty file": (lambda r: _first_case(r).write_text(""), "empty file"),
    "missing case file": (lambda r: _first_case(r).unlink(), "is missing"),
    "benchmark mismatch": (lambda r: _edit(_first_case(r), lambda c: c.update(benchmark="landmark_trials")),
                           "but the file is in panel"),
    "grading method per benchmark": (lambda r: _edit(r / "registry.json", lambda g: g["panels"][0].update(
        grading_method="f1_weighted_rubric")), "is graded by points_rubric"),
    "manifest count": (lambda r: _edit(r / "data" / "drug_safety" / "manifest.json", lambda m: m.update(case_count=99)),
                       "case_count"),
    "broken registry": (lambda r: (r / "registry.json").write_text("[1, 2"), "invalid JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_checkout_gives_file_and_field(name: str, checkout: Path, capsys) -> None:
    breaker, message = BAD[name]
    breaker(checkout)
    problems = validate_dataset(checkout)
    assert problems, name
    assert any(message in str(p) for p in problems), [str(p) for p in problems]
    assert all(str(checkout) in p.file or p.file == "dataset" for p in problems)
    assert main(["dataset", "validate", "--dataset", str(checkout)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("bedside: error: ") for line in err)
    assert any(message in line for line in err)


def test_duplicate_case_and_unknown_benchmark_in_a_case_file(tmp_path: Path, sample_dataset) -> None:
    cases = list(sample_dataset.raw_cases)
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps(c) + "\n" for c in cases + cases[:1]))
    assert any("duplicate case" in str(p) and f"{dup}:31" in str(p) for p in validate_dataset(dup))
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({**cases[0], "benchmark": "astrology"}) + "\n")
    problems = validate_dataset(unknown)
    assert [p.field for p in problems] == ["benchmark"] and "unknown benchmark 'astrology'" in str(problems[0])
    not_json = tmp_path / "bad.jsonl"
    not_json.write_text(json.dumps(cases[0]) + "\nnot json\n")
    assert "bad.jsonl:2" in str(validate_dataset(not_json)[0])


def test_dataset_info_json(capsys) -> None:
    assert main(["dataset", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    ds = load_dataset()
    assert info["dataset_sha256"] == ds.sha256
    assert info["cases"] == len(ds.raw_cases)
    assert info["benchmarks"] == ds.benchmarks


def test_dataset_info_on_public_split(shared_bench: Path, capsys) -> None:
    assert main(["dataset", "info", "--dataset", str(shared_bench), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dataset_sha256"] == PUBLIC_SHA and info["cases"] == 250


@pytest.mark.parametrize("command", ["validate", "info"])
def test_the_dataset_path_is_taken_as_an_argument_or_an_option(command, capsys) -> None:
    outputs = []
    for args in ([str(SAMPLE)], ["--dataset", str(SAMPLE)], [str(SAMPLE), "--dataset", str(SAMPLE)]):
        assert main(["dataset", command, *args]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2] != ""
    assert main(["dataset", command, str(SAMPLE), "--dataset", str(SAMPLE / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "give the dataset once: as PATH or as --dataset" in captured.err
