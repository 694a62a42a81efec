"""The adversary's inputs: each gives exactly one line ``bedside: error: <file>: <field>: <message>``, a
non-zero exit, no traceback, no hang, and leaves the dataset and the store as they were."""

from __future__ import annotations

import json
import os
import shutil
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests import reference_model as rm
from tests.conftest import SAMPLE, snapshot
from toolkit.cli import main
from toolkit.inputs import DATASET_FILE_LIMIT, RESULT_FILE_LIMIT


@contextmanager
def deadline(seconds: int = 20) -> Iterator[None]:
    """A FIFO that the code under test opened blocking would hang the suite: fail instead."""
    def expire(*_):
        raise TimeoutError("the command blocked (a FIFO or device was read?)")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def one_error(capsys, argv: list[str], *expected: str) -> str:
    """Run the CLI; assert exit 1 and exactly one stderr line holding every expected fragment."""
    with deadline():
        code = main(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 1, err
    assert len(lines) == 1, err
    assert lines[0].startswith("bedside: error: ") and "Traceback" not in err, err
    for fragment in expected:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# -- datasets ------------------------------------------------------------------

@pytest.fixture
def bench(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    shutil.copytree(SAMPLE, root)
    return root


def first_case(root: Path, panel: str = "drug_safety") -> Path:
    manifest = json.loads((root / "data" / panel / "manifest.json").read_text())
    return root / "data" / panel / "cases" / f"{manifest['case_ids'][0]}.json"


def with_points(literal: str, panel: str = "drug_safety") -> Callable[[Path], Path]:
    """Write the first item's points as a raw JSON literal (json.dumps cannot write most of these)."""
    def breaker(root: Path) -> Path:
        path = first_case(root, panel)
        case = json.loads(path.read_text())
        case["rubric_items"][0]["points"] = "@@POINTS@@"
        path.write_text(json.dumps(case).replace('"@@POINTS@@"', literal))
        return path
    return breaker


def write_text(text: str) -> Callable[[Path], Path]:
    def breaker(root: Path) -> Path:
        path = first_case(root)
        path.write_text(text)
        return path
    return breaker


def edit_json(relative: str, change: Callable[[dict], None]) -> Callable[[Path], Path]:
    def breaker(root: Path) -> Path:
        path = root / relative
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
        return path
    return breaker


def lone_surrogate(root: Path) -> Path:
    path = first_case(root)
    path.write_text(path.read_text().replace('"prompt": "', '"prompt": "\\ud800', 1))
    return path


def fifo_case(root: Path) -> Path:  # an unlisted *.json the loader globs
    path = root / "data" / "drug_safety" / "cases" / "zz-fifo.json"
    os.mkfifo(path)
    return path


def fifo_listed(root: Path) -> Path:
    path = first_case(root)
    path.unlink()
    os.mkfifo(path)
    return path


def device_link(root: Path) -> Path:
    path = first_case(root)
    path.unlink()
    path.symlink_to("/dev/zero")
    return path


def huge_case(root: Path) -> Path:
    path = first_case(root)
    os.truncate(path, DATASET_FILE_LIMIT + 1)  # sparse: the cap must refuse it before reading
    return path


def link_outside(root: Path) -> Path:
    path = first_case(root)
    outside = root.parent / "outside.json"
    outside.write_text(path.read_text())
    path.unlink()
    path.symlink_to(outside)
    return path


def panel_link_outside(root: Path) -> Path:
    folder = root / "data" / "drug_safety"
    shutil.move(folder, root.parent / "elsewhere")
    folder.symlink_to(root.parent / "elsewhere")
    return root / "registry.json"


def escape_case_id(root: Path) -> Path:
    return edit_json("data/drug_safety/manifest.json", lambda m: m["case_ids"].__setitem__(0, "../../../x"))(root)


def registry_path(value: str) -> Callable[[Path], Path]:
    return edit_json("registry.json", lambda r: r["panels"][0].update(path=value))


DATASET_CASES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    # name: (breaker returning the file to name, field, message fragment)
    "points NaN": (with_points("NaN"), "rubric_items[0].points", "NaN is not a finite number"),
    "points Infinity": (with_points("Infinity"), "rubric_items[0].points", "Infinity is not a finite number"),
    "points -Infinity": (with_points("-Infinity", "safety_diagnostic"), "rubric_items[0].points", "not a finite"),
    "points 1e400": (with_points("1e400"), "rubric_items[0].points", "1e400 is not a finite number"),
    "points 400 digits": (with_points("9" * 400), "rubric_items[0].points", "an integer of 400 digits"),
    "points 5000 digits": (with_points("9" * 5000), "rubric_items[0].points", "an integer of 5000 digits"),
    "points out of range": (with_points("7"), "rubric_items[0].points", "7 is greater than the maximum of 3"),
    "points not integer": (with_points("1.5"), "rubric_items[0].points", "is not of type \"integer\""),
    "nested 100k deep": (write_text("[" * 100_000 + "]" * 100_000), "nesting", "nested deeper than 64"),
    "lone surrogate": (lone_surrogate, "prompt", "lone surrogate"),
    "unlisted FIFO": (fifo_case, "file", "is a FIFO, not a regular file"),
    "listed FIFO": (fifo_listed, "file", "is a FIFO, not a regular file"),
    "link to /dev/zero": (device_link, "file", "resolves outside the dataset root"),
    "over the size cap": (huge_case, "size", "over the limit of 64.0 MiB"),
    "case file linked outside": (link_outside, "file", "resolves outside the dataset root"),
    "panel folder linked outside": (panel_link_outside, "panels[0].path", "is outside the dataset root"),
    "registry path ../../outside": (registry_path("../../outside"), "panels[0].path", "'../../outside' is outside"),
    "registry path /etc": (registry_path("/etc"), "panels[0].path", "'/etc' is outside the dataset root"),
    "manifest case id ../../../x": (escape_case_id, "case_ids[0]", "'../../../x' is not a plain file name"),
}


@pytest.mark.parametrize("name", sorted(DATASET_CASES))
def test_bad_dataset_gives_one_line_and_changes_nothing(name: str, bench: Path, capsys) -> None:
    breaker, field, message = DATASET_CASES[name]
    named = breaker(bench)
    before = snapshot(bench) if name not in ("unlisted FIFO", "listed FIFO", "link to /dev/zero") else None
    line = one_error(capsys, ["dataset", "validate", "--dataset", str(bench)], f": {field}: ", message)
    assert str(named) in line
    if before is not None:
        assert snapshot(bench) == before


def test_single_case_files_that_are_not_regular_files(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "cases.jsonl"
    os.mkfifo(fifo)
    one_error(capsys, ["dataset", "validate", "--dataset", str(fifo)], f"{fifo}: file: is a FIFO")
    zero = tmp_path / "cases.parquet"
    zero.symlink_to("/dev/zero")
    one_error(capsys, ["dataset", "info", "--dataset", str(zero)], f"{zero}: file: is a character device")
    line = tmp_path / "one.jsonl"
    line.write_text('{"case_id": "a", "rubric_items": [{"points": NaN}]}\n')
    one_error(capsys, ["dataset", "validate", "--dataset", str(line)], f"{line}:1: rubric_items[0].points: NaN")


def test_jsonl_lines_end_at_lf_only_and_parquet_numbers_are_checked(tmp_path: Path, sample_dataset, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toolkit.dataset import item_id_for, load_dataset

    cases = json.loads(json.dumps(sample_dataset.raw_cases))  # a deep copy: the fixture is shared
    cases[0]["prompt"] += " \u2028 (a line separator inside the text)"
    cases[0]["rubric_items"] = [dict(item, item_id=item_id_for(cases[0]["prompt"], n))
                                for n, item in enumerate(cases[0]["rubric_items"])]
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    assert load_dataset(jsonl).case(cases[0]["case_id"])["prompt"] == cases[0]["prompt"]
    cases[1]["rubric_items"][0]["points"] = float("nan")
    parquet = tmp_path / "cases.parquet"
    pq.write_table(pa.Table.from_pylist(cases), parquet)
    one_error(capsys, ["dataset", "validate", "--dataset", str(parquet)], f"{parquet} row 2: rubric_items[0].points: ")


def test_points_range_is_the_protocols() -> None:
    from toolkit import protocol
    from toolkit.dataset import schema_path

    for method in protocol.GRADING_METHODS:
        points = json.loads(schema_path(method).read_text())["properties"]["rubric_items"]["items"]["properties"]["points"]
        assert (points["type"], points["minimum"], points["maximum"]) == (
            "integer", min(protocol.POINTS_TO_CLASS), max(protocol.POINTS_TO_CLASS))


# -- result files ----------------------------------------------------------------

@pytest.fixture
def filled(tmp_path: Path, sample_dataset) -> tuple[Path, list[dict]]:
    """A store holding one imported run, and good rows to spoil."""
    rows = [r for r in rm.make_rows(list(sample_dataset.raw_cases), seed=8, error_rate=0) if "score" in r][:4]
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = tmp_path / "store"
    assert main(["import", str(good), "--run-id", "existing", "--store", str(store)]) == 0
    return store, rows


def spoiled(rows: list[dict], key: str, literal: str) -> str:
    """The rows as JSONL, line 2's ``key`` written as the raw JSON literal."""
    second = dict(rows[1], **{key: "@@VALUE@@"})
    lines = [json.dumps(rows[0]), json.dumps(second).replace('"@@VALUE@@"', literal), *map(json.dumps, rows[2:])]
    return "\n".join(lines) + "\n"


RESULT_CASES: dict[str, tuple[str, str, str, str]] = {
    # name: (key, JSON literal, field, message fragment)
    "score NaN": ("score", "NaN", "score", "NaN is not a finite number"),
    "score Infinity": ("score", "Infinity", "score", "Infinity is not a finite number"),
    "score 1e400": ("score", "1e400", "score", "1e400 is not a finite number"),
    "score 5.0": ("score", "5.0", "score", "5.0 is outside [0, 1]"),
    "score -0.25": ("score", "-0.25", "score", "-0.25 is outside [0, 1]"),
    "score 400 digits": ("score", "1" * 400, "score", "an integer of 400 digits"),
    "score 5000 digits": ("score", "1" * 5000, "score", "an integer of 5000 digits"),
    "score as text": ("score", '"0.5"', "score", "a string, not a number"),
    "score boolean": ("score", "true", "score", "a boolean"),
    "effort as object": ("answer_reasoning_effort", '{"level": "high"}', "answer_reasoning_effort",
                         "an object, but must be a string or null"),
    "started_at a number": ("started_at", "1767225600", "started_at", "a number), but must be ISO-8601"),
    "finished_at not ISO": ("finished_at", '"yesterday"', "finished_at", "'yesterday', but must be ISO-8601"),
    "temperature as text": ("answer_temperature", '"1"', "answer_temperature", "a non-negative number or null"),
    "temperature negative": ("judge_temperature", "-1", "judge_temperature", "a non-negative number or null"),
    "elapsed Infinity": ("elapsed_seconds", "Infinity", "elapsed_seconds", "not a finite number"),
    "model as list": ("answer_model", '["a"]', "answer_model", "a list, but must be a string or null"),
    "matched not boolean": ("decisions", '[{"item_id": "x", "matched": 1}]', "decisions[0]", "boolean matched"),
    "nested 100k deep": ("score_components", "[" * 100_000 + "]" * 100_000, "nesting", "nested deeper than 64"),
    "lone surrogate answer": ("answer", '"ok \\udc00"', "answer", "lone surrogate"),
}


@pytest.mark.parametrize("name", sorted(RESULT_CASES))
def test_bad_result_file_gives_one_line_and_changes_nothing(name: str, tmp_path: Path, filled, capsys) -> None:
    store, rows = filled
    key, literal, field, message = RESULT_CASES[name]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(spoiled(rows, key, literal))
    before = snapshot(store)
    for argv in (["--run-id", "new"], ["--run-id", "existing", "--replace"]):
        one_error(capsys, ["import", str(bad), *argv, "--store", str(store)], f"{bad}:2: {field}: ", message)
        assert snapshot(store) == before


def test_result_files_that_are_not_regular_files(tmp_path: Path, filled, capsys) -> None:
    store, _ = filled
    before = snapshot(store)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    one_error(capsys, ["import", str(fifo), "--store", str(store)], f"{fifo}: file: is a FIFO")
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    one_error(capsys, ["import", str(zero), "--store", str(store)], f"{zero}: file: is a character device")
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as handle:  # sparse: refused by its size, never read
        handle.truncate(RESULT_FILE_LIMIT + 1)
    one_error(capsys, ["import", str(huge), "--store", str(store)], f"{huge}: size: 4.0 GiB is over the limit of 4.0 GiB")
    assert snapshot(store) == before



def test_a_byte_order_mark_is_named(tmp_path: Path, filled, capsys) -> None:
    """A result file saved with a UTF-8 BOM (JSON does not allow one) says so, not 'Expecting value'."""
    store, rows = filled
    before = snapshot(store)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows).encode())
    one_error(capsys, ["import", str(bom), "--store", str(store)], f"{bom}:1: column 1: ",
              "starts with a UTF-8 byte order mark (BOM)")
    assert snapshot(store) == before

def test_summary_json_is_valid_json_when_a_mean_is_nan(tmp_path: Path, sample_dataset, capsys) -> None:
    case = sample_dataset.raw_cases[0]
    only_errors = [{"protocol_version": rm.PROTOCOL, "case_id": case["case_id"], "benchmark": case["benchmark"],
                    "grading_method": case["grading_method"], "answer_model": "m", "judge_model": "j",
                    "finished_at": "2026-01-01T00:00:00+00:00", "error": "RuntimeError: boom"}]
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(only_errors[0]) + "\n")
    store = str(tmp_path / "store")
    assert main(["import", str(path), "--run-id", "e", "--store", store]) == 0
    capsys.readouterr()
    assert main(["summary", "--run", "e", "--store", store, "--json", "--samples", "10"]) == 0
    out = capsys.readouterr().out

    def refuse(name: str):
        raise AssertionError(f"bare {name} in JSON output")
    summary = json.loads(out, parse_constant=refuse)["e"]
    assert summary["completed_cases"] == 0 and summary["overall_macro_mean"] is None


def test_an_unforeseen_exception_is_still_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    import toolkit.sql._query

    def broken(*_args, **_kwargs):
        raise TypeError("something nobody checked\nsecond line")
    monkeypatch.setattr(toolkit.sql._query, "query", broken)
    monkeypatch.setattr(toolkit.sql._query, "query_head", broken)  # table format reads only the first rows
    (tmp_path / "store").mkdir()
    one_error(capsys, ["sql", "SELECT 1", "--store", str(tmp_path / "store")],
              "internal error: TypeError: something nobody checked", "BEDSIDE_DEBUG=1")
    monkeypatch.setenv("BEDSIDE_DEBUG", "1")
    with pytest.raises(TypeError):
        main(["sql", "SELECT 1", "--store", str(tmp_path / "store")])


def test_a_store_path_that_is_not_utf8_is_one_line_for_every_command(tmp_path: Path, filled, capsys) -> None:
    store, _ = filled
    odd = os.path.join(os.fsencode(tmp_path), b"st\xff")
    os.rename(os.fsencode(store), odd)
    for argv in (["summary", "--all"], ["sql", "SELECT 1"], ["export", "--run", "existing", "--out",
                                                              str(tmp_path / "x.jsonl")]):
        one_error(capsys, [*argv, "--store", os.fsdecode(odd)], "st\\", "not UTF-8")


def test_an_import_out_of_memory_says_so(tmp_path: Path, filled, monkeypatch, capsys) -> None:
    import toolkit.reference._read

    store, rows = filled
    before = snapshot(store)

    def exhausted(*_args, **_kwargs):
        raise MemoryError()
    monkeypatch.setattr(toolkit.reference._read, "iter_result_rows", exhausted)
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n")
    one_error(capsys, ["import", str(path), "--run-id", "big", "--store", str(store)],
              "out of memory: the file does not fit in this machine's memory")
    assert snapshot(store) == before


def test_a_file_mixing_models_is_one_line_and_a_long_list_says_how_many_more(capsys, demo_store: Path,
                                                                            tmp_path: Path) -> None:
    for run in ("sim/weak", "sim/medium"):
        assert main(["export", "--run", run, "--out", str(tmp_path / f"{run[4:]}.jsonl"), "--store", str(demo_store)]) == 0
    mixed = tmp_path / "mixed.jsonl"
    # the demo's runs have three answer samples: export writes one file per sample, <out>.sample<i>.jsonl
    mixed.write_text((tmp_path / "weak.sample0.jsonl").read_text() + (tmp_path / "medium.sample0.jsonl").read_text())
    capsys.readouterr()
    store = tmp_path / "store"
    # Every row of the second model mixes models: one line says so, not one per row.
    one_error(capsys, ["import", str(mixed), "--store", str(store)], "answer_model: 'sim/medium' but earlier rows have "
              "'sim/weak'; the file mixes answer models")
    csv = tmp_path / "table.jsonl"
    csv.write_text("a,b,c\n" * 300)
    assert main(["import", str(csv), "--store", str(store)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 101 and lines[0].startswith(f"bedside: error: {csv}:1: column 1: line is not JSON")
    assert lines[-1] == "bedside: error: ... and 200 more problem(s) not listed"
    from toolkit.store import Store

    assert Store.open(store).run_ids() == []  # neither file left a run behind
