"""``bedside audit``: a clean reference file passes; each tampering gives exactly its own lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from toolkit.reference._audit import audit_file
from toolkit.cli import main

SAMPLES = 200  # the audit resamples with the summary's own count and seed


def _clean_rows(dataset) -> list[dict]:
    """One successful row per case of the dataset, in a shuffled completion order."""
    rows = rm.make_rows(list(dataset.raw_cases), seed=21, error_rate=0.0)
    last = {r["case_id"]: r for r in rows}
    return [last[c] for c in dict.fromkeys(r["case_id"] for r in rows)]


def _write(tmp_path: Path, dataset, rows: list[dict], summary_rows: list[dict] | None = None,
           name: str = "model.jsonl") -> Path:
    """The rows and the summary the reference would write for ``summary_rows`` (default: the rows)."""
    path = tmp_path / name
    path.unlink(missing_ok=True)
    rm.write_rows(path, rows)
    rm.write_summary(path, rm.summarize(summary_rows if summary_rows is not None else rows, SAMPLES, 42,
                                        {c["case_id"] for c in dataset.raw_cases}, dataset.sha256))
    return path


def _lines(path: Path, dataset) -> list[str]:
    return [str(p) for p in audit_file(path, dataset).problems]


@pytest.fixture(scope="module")
def clean(public_dataset) -> list[dict]:
    return _clean_rows(public_dataset)


def test_a_clean_file_passes(tmp_path: Path, shared_bench: Path, public_dataset, clean, capsys) -> None:
    path = _write(tmp_path, public_dataset, clean)
    report = audit_file(path, public_dataset)
    assert report.ok and report.problems == [] and report.completed_cases == len(public_dataset.raw_cases)
    assert report.summary_path == str(tmp_path / "model.summary.json")
    assert main(["audit", str(path), "--dataset", str(shared_bench)]) == 0
    assert "no problem found" in capsys.readouterr().out
    assert main(["audit", str(path), "--dataset", str(shared_bench), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["problem_count"] == 0 and out["rows"] == len(clean)


def _points_row(rows: list[dict]) -> int:
    return next(i for i, r in enumerate(rows) if r["grading_method"] == "points_rubric"
                and 0 < r["score"] < 1 and any(d["points"] > 0 and not d["matched"] for d in r["decisions"]))


def test_row_tampering_gives_exactly_its_lines(tmp_path: Path, public_dataset, clean) -> None:
    f = str(tmp_path / "model.jsonl")
    i = _points_row(clean)
    row = clean[i]
    case = public_dataset.case(row["case_id"])

    # A changed score (the summary regenerated from the changed rows, as a careless editor would).
    rows = copy.deepcopy(clean)
    rows[i]["score"] = round(row["score"] + 0.01, 6)
    assert _lines(_write(tmp_path, public_dataset, rows), public_dataset) == [
        f"{f}:{i + 1}: score: {rows[i]['score']!r} but the decisions give {row['score']!r}"]

    # A flipped decision: score and the components it changes.
    rows = copy.deepcopy(clean)
    k = next(k for k, d in enumerate(row["decisions"]) if d["points"] > 0 and not d["matched"])
    rows[i]["decisions"][k]["matched"] = True
    score, comps = rm.score_case(case, {d["item_id"]: d["matched"] for d in rows[i]["decisions"]})
    assert _lines(_write(tmp_path, public_dataset, rows), public_dataset) == [
        f"{f}:{i + 1}: score: {row['score']!r} but the decisions give {score!r}",
        f"{f}:{i + 1}: score_components.matched_signed_points: "
        f"{row['score_components']['matched_signed_points']!r} but the decisions give {comps['matched_signed_points']!r}",
        f"{f}:{i + 1}: score_components.raw_score: {row['score_components']['raw_score']!r} "
        f"but the decisions give {comps['raw_score']!r}"]

    # A dropped decision, an extra item, a duplicated decision, points that differ from the rubric.
    dropped = row["decisions"][-1]["item_id"]
    for change, expected in [
        (lambda r: r["decisions"].pop(), f"decisions: no decision for 1 rubric item(s), first {dropped}"),
        (lambda r: r["decisions"].append({"item_id": "zz_9", "points": 1, "matched": True}),
         f"decisions[{len(row['decisions'])}].item_id: 'zz_9' is not a rubric item of case {row['case_id']}"),
        (lambda r: r["decisions"].append(dict(r["decisions"][0])),
         f"decisions[{len(row['decisions'])}].item_id: duplicate decision for {row['decisions'][0]['item_id']}"),
        (lambda r: r["decisions"][0].update(points=7),
         f"decisions[0].points: 7 but the rubric gives {row['decisions'][0]['points']}"),
    ]:
        rows = copy.deepcopy(clean)
        change(rows[i])
        assert _lines(_write(tmp_path, public_dataset, rows), public_dataset) == [f"{f}:{i + 1}: {expected}"]


def test_case_tampering_gives_exactly_its_lines(tmp_path: Path, public_dataset, sample_dataset, clean) -> None:
    f = str(tmp_path / "model.jsonl")
    n = len(clean)
    # A duplicated case (a second successful row) and a case outside the dataset.
    stranger = {**rm.make_rows(list(sample_dataset.raw_cases[:1]), seed=1, error_rate=0.0)[0]}
    rows = clean + [copy.deepcopy(clean[3]), stranger]
    assert _lines(_write(tmp_path, public_dataset, rows), public_dataset) == [  # in file order
        f"{f}:{n + 1}: case_id: case {clean[3]['case_id']} has another successful row (line 4); "
        "the reference keeps this later one",
        f"{f}:{n + 2}: case_id: {stranger['case_id']!r} is not a case of the dataset {public_dataset.source} "
        f"(sha256 {public_dataset.sha256[:12]})"]
    # A dropped case, and one whose only row is an error.
    failed = {k: clean[6][k] for k in ("protocol_version", "case_id", "benchmark", "grading_method",
                                         "answer_model", "judge_model", "finished_at")}
    failed["error"] = "RuntimeError: boom"
    rows = clean[:5] + clean[6:]
    rows[5] = failed
    lines = _lines(_write(tmp_path, public_dataset, rows), public_dataset)
    assert sorted(lines) == sorted([
        f"{f}: case_id: case {clean[5]['case_id']} ({clean[5]['benchmark']}) of the dataset has no successful row",
        f"{f}: case_id: case {clean[6]['case_id']} ({clean[6]['benchmark']}) of the dataset has no successful row; "
        "its last row (line 6) is an error"])


def test_summary_tampering_gives_exactly_its_lines(tmp_path: Path, public_dataset, clean) -> None:
    path = _write(tmp_path, public_dataset, clean)
    s = tmp_path / "model.summary.json"
    good = json.loads(s.read_text())
    name = sorted(good["benchmarks"])[2]
    for change, expected in [
        (lambda d: d.update(overall_macro_mean=d["overall_macro_mean"] + 0.01),
         [f"{s}: overall_macro_mean: {good['overall_macro_mean'] + 0.01!r} but the rows give "
          f"{good['overall_macro_mean']!r}"]),
        (lambda d: d["benchmarks"][name].update(mean=0.5, ci95=[0.4, good["benchmarks"][name]["ci95"][1]]),
         [f"{s}: benchmarks.{name}.mean: 0.5 but the rows give {good['benchmarks'][name]['mean']!r}",
          f"{s}: benchmarks.{name}.ci95: [0.4, {good['benchmarks'][name]['ci95'][1]!r}] but the rows give "
          f"{good['benchmarks'][name]['ci95']!r}"]),
        (lambda d: d.update(overall_ci95=[d["overall_ci95"][0], 0.99]),
         [f"{s}: overall_ci95: [{good['overall_ci95'][0]!r}, 0.99] but the rows give {good['overall_ci95']!r}"]),
        (lambda d: d.update(dataset_sha256="0" * 64),
         [f"{s}: dataset_sha256: '{'0' * 64}' but the dataset {public_dataset.source} has {public_dataset.sha256}"]),
        (lambda d: d.update(completed_cases=d["completed_cases"] + 1, errors=3),
         [f"{s}: completed_cases: {len(clean) + 1} but the rows give {len(clean)}",
          f"{s}: errors: 3 but the rows give 0"]),
        (lambda d: d.pop("bootstrap_seed"), [f"{s}: bootstrap_seed: missing"]),
    ]:
        tampered = copy.deepcopy(good)
        change(tampered)
        s.write_text(json.dumps(tampered, indent=2) + "\n")
        assert _lines(path, public_dataset) == expected
    # Another seed, stated: the intervals are recomputed with it, so nothing disagrees.
    other = rm.summarize(clean, SAMPLES, 7, {c["case_id"] for c in public_dataset.raw_cases}, public_dataset.sha256)
    s.write_text(json.dumps(other, indent=2) + "\n")
    assert _lines(path, public_dataset) == []
    s.write_text("{not json")
    assert [p.field for p in audit_file(path, public_dataset).problems] == ["file"]


def test_cli_lists_every_problem_bounded(tmp_path: Path, shared_bench: Path, public_dataset, clean, capsys) -> None:
    rows = copy.deepcopy(clean)
    for r in rows[:30]:
        r["score"] = 0.123
    path = _write(tmp_path, public_dataset, rows, summary_rows=clean)
    code = main(["audit", str(path), "--dataset", str(shared_bench)])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert code == 1 and len([x for x in lines if ": score: 0.123 but" in x]) == 30
    assert all(x.startswith(str(tmp_path)) for x in lines)
    assert "problem(s)" in captured.err and captured.err.startswith("bedside: audit: ")
    assert main(["audit", str(path), "--dataset", str(shared_bench), "--limit", "5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and len(out["problems"]) == 5 and out["problem_count"] == len(lines)
    assert out["truncated"] is True and [p["line"] for p in out["problems"]] == [1, 2, 3, 4, 5]
    assert {p["field"] for p in out["problems"]} == {"score"}
    # A file that cannot be read at all: one error line, non-zero exit, no traceback.
    assert main(["audit", str(tmp_path / "missing.jsonl"), "--dataset", str(shared_bench)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bedside: error: ") and len(err.splitlines()) == 1


def test_bad_lines_do_not_stop_the_audit(tmp_path: Path, public_dataset, clean) -> None:
    path = tmp_path / "broken.jsonl"
    rm.write_rows(path, clean[:3])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("not json\n[1]\n")
    rm.write_rows(path, [{**clean[3], "score": 2}])
    with open(path, "ab") as binary:
        binary.write(b'{"case_id": "\xff"}\n')
    rm.write_rows(path, clean[4:5])
    lines = _lines(path, public_dataset)
    assert lines[:5] == [f"{path}:4: column 1: line is not JSON: Expecting value",
                         f"{path}:5: row: must be a JSON object",
                         f"{path}:6: score: 2 is outside [0, 1]",
                         f"{path}:6: score: 2 but the decisions give {clean[3]['score']!r}",
                         f"{path}:7: encoding: not UTF-8 (byte 13)"]
    assert not any(":8:" in x for x in lines)  # the line after the bad byte is read and clean


def test_an_exported_collected_run_audits_clean(tmp_path: Path, store, sample_dataset) -> None:
    """Export and audit agree: a collected run (two judges, two passes, failed cases) written by ``export``
    has nothing wrong but the cases that failed."""
    from tests.analysis_sim import write_run
    from toolkit.reference import export_reference

    failed = [c["case_id"] for c in sample_dataset.raw_cases[:2]]
    write_run(store, sample_dataset, "c", skill=0.3, seed=5, passes=2, extra_judges=(("judge-y", 0.2),),
              failed=frozenset(failed))
    out, summary = export_reference(store, "c", tmp_path / "c.jsonl")
    report = audit_file(out, sample_dataset)
    assert report.summary_path == str(summary)
    assert [str(p) for p in report.problems] == [
        f"{out}: case_id: case {c} ({sample_dataset.case(c)['benchmark']}) of the dataset has no successful row; "
        f"its last row (line {i + 1}) is an error" for i, c in enumerate(failed)]
