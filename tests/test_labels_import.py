"""``bedside labels import``: a review page's export or a CSV/JSONL table into ``human_labels``, checked
against the store first, one commit; every malformed file is one line, exit 1 and the store unchanged."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import snapshot
from tests.test_cli_process import bedside_process
from toolkit.labels import import_labels, read_labels
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.store import Store

RUNS = ("hidden-alpha", "hidden-beta")
MODELS = {"hidden-alpha": "model-alpha-secret", "hidden-beta": "model-beta-secret"}
COLUMNS = ["review_id", "reviewer", "run_id", "case_id", "sample", "item_id", "label", "labelled_at"]


def answers_store(root: Path, dataset, samples: int = 1, answer=None) -> Store:
    """Two runs that answered every case of the sample (``samples`` times); no judge needed to review them.
    The answers name neither run nor model (the blinding test looks for both in the page)."""
    store = Store.open(root)
    store.write_dataset(dataset)
    for k, run_id in enumerate(RUNS):
        store.write("runs", run_id, [{
            "run_id": run_id, "answer_model": MODELS[run_id], "judge_model": "judge-x",
            "protocol_version": PROTOCOL_VERSION, "dataset_sha256": dataset.sha256, "source": "collected",
            "created_at": "2025-01-01T00:00:00Z", "settings": None}])
        store.write("answers", run_id, [{
            "run_id": run_id, "case_id": c, "sample": s, "attempt": 1, "seq": i * samples + s,
            "answer_model": MODELS[run_id],
            "answer": answer(k, i, s) if answer else f"Plan {k}.{i}.{s}: rest, fluids and review in two days.",
            "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:01:00Z", "error": None}
            for i, c in enumerate(dataset.cases["case_id"].to_list()) for s in range(samples)])
    return store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, sample_dataset) -> Path:
    return answers_store(tmp_path_factory.mktemp("labels") / "store", sample_dataset, samples=2).root


@pytest.fixture
def two_runs(built: Path, tmp_path: Path) -> Store:
    """A fresh copy of the module's store for each test (building one per test would cost more)."""
    shutil.copytree(built, tmp_path / "store", symlinks=True)
    return Store.open(tmp_path / "store")


def _items(dataset) -> list[tuple[str, str]]:
    """(case_id, item_id) of every rubric item of the sample."""
    return list(dataset.rubric_items.select("case_id", "item_id").iter_rows())


def _table_rows(dataset, n: int = 6) -> list[dict]:
    items = _items(dataset)
    out = []
    for k, (case_id, item_id) in enumerate(items[:n]):
        out.append({"reviewer": "dr-a" if k % 2 else "dr-b", "run_id": RUNS[k % 2], "case_id": case_id,
                    "item_id": item_id, "label": ("met", "not_met", "unsure")[k % 3], "sample": str(k % 2)})
    return out


def _write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0])
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _expected(rows: list[dict], review_id=None) -> list[tuple]:
    return sorted((review_id, r["reviewer"], r["run_id"], r["case_id"], int(r.get("sample") or 0), r["item_id"],
                   r["label"], r.get("labelled_at")) for r in rows)


def _stored(store: Store) -> list[tuple]:
    """The stored labels without their answer's hash, after checking it is the hash of the answer labelled."""
    import hashlib

    labels = read_labels(store)
    answers = store.read("answers", columns=["run_id", "case_id", "sample", "answer"])
    text = {(r, c, s): a for r, c, s, a in answers.iter_rows()}
    for run_id, case_id, sample, digest in labels.select("run_id", "case_id", "sample", "answer_sha256").iter_rows():
        assert digest == hashlib.sha256(text[run_id, case_id, sample].encode()).hexdigest()
    return sorted(labels.select(COLUMNS).iter_rows())


def test_a_csv_table_is_stored_exactly_and_listed(two_runs: Store, tmp_path: Path, sample_dataset) -> None:
    rows = _table_rows(sample_dataset)
    path = _write_csv(tmp_path / "labels.csv", rows)
    done = bedside_process(["labels", "import", str(path), "--store", str(two_runs.root)])
    assert done.returncode == 0, done.stderr
    assert "imported 6 labels" in done.stdout and "reviewers dr-a, dr-b" in done.stdout
    assert _stored(two_runs) == _expected(rows)
    assert read_labels(two_runs).columns == COLUMNS[:5] + ["answer_sha256"] + COLUMNS[5:]
    assert read_labels(two_runs, [RUNS[0]])["run_id"].unique().to_list() == [RUNS[0]]
    listed = bedside_process(["labels", "--store", str(two_runs.root), "--format", "json"])
    assert listed.returncode == 0, listed.stderr
    by = {(r["run_id"], r["reviewer"]): r for r in json.loads(listed.stdout)}
    assert by[(RUNS[1], "dr-a")]["items"] == 3 and by[(RUNS[0], "dr-b")]["items"] == 3
    assert sum(r["met"] + r["not_met"] + r["unsure"] for r in by.values()) == 6
    assert sum(r["unsure"] for r in by.values()) == 2
    from toolkit.sql import connect  # SQL sees the same rows

    assert sorted(connect(two_runs, derived=()).execute(f"SELECT {', '.join(COLUMNS)} FROM human_labels")
                  .fetchall()) == _expected(rows)


def test_a_jsonl_table_defaults_the_sample_and_a_second_import_adds_nothing(two_runs: Store, tmp_path: Path,
                                                                            sample_dataset) -> None:
    rows = [{k: v for k, v in r.items() if k != "sample"} for r in _table_rows(sample_dataset, 4)]
    rows[0]["sample"] = 1
    rows[1]["labelled_at"] = "2025-03-01T11:00:00+01:00"
    rows[2]["reviewer"] = f" {rows[2]['reviewer']} "  # a spreadsheet's stray spaces: the same reviewer
    path = _write_jsonl(tmp_path / "labels.jsonl", rows)
    first = import_labels(two_runs, path)
    assert (first.added, first.already) == (4, 0)
    rows[1]["labelled_at"] = "2025-03-01T10:00:00+00:00"  # stored in UTC
    rows[2]["reviewer"] = rows[2]["reviewer"].strip()
    assert _stored(two_runs) == _expected(rows)
    version = two_runs.version(), snapshot(two_runs.root / "human_labels")
    again = bedside_process(["labels", "import", str(path), "--store", str(two_runs.root)])
    assert again.returncode == 0, again.stderr
    assert "imported 0 labels" in again.stdout and "4 already stored, skipped" in again.stdout
    assert (two_runs.version(), snapshot(two_runs.root / "human_labels")) == version  # no commit at all


def test_a_page_export_is_unblinded_through_the_stores_review(two_runs: Store, tmp_path: Path) -> None:
    from toolkit.labels import write_review

    review_id = write_review(two_runs, list(RUNS), 3, 7, tmp_path / "review.html")
    key = two_runs.read("reviews", keys=[review_id]).sort("position")
    items = two_runs.read("rubric_items")
    labels, want = [], []
    for row in key.iter_rows(named=True):
        item = items.filter(items["case_id"] == row["case_id"])["item_id"][0]
        labels.append({"blind_id": row["blind_id"], "item_id": item, "label": "met", "labelled_at": None})
        want.append((review_id, "dr-c", row["run_id"], row["case_id"], row["sample"], item, "met", None))
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"format": "bedside-review-labels 1", "review_id": review_id, "reviewer": "dr-c",
                                "exported_at": "2025-01-01T00:00:00Z", "labels": labels}), encoding="utf-8")
    done = import_labels(two_runs, path)
    assert done.added == len(labels) == 6 and done.review_id == review_id
    assert _stored(two_runs) == sorted(want)


# name -> (file name, content builder(dataset, store, tmp_path) -> text, the one line's telling part)
def _bad_table(change):
    def build(dataset, store, tmp_path):
        rows = _table_rows(dataset, 3)
        change(rows, dataset)
        return "labels.jsonl", "".join(json.dumps(r) + "\n" for r in rows)
    return build


def _export(change, twice: str | None = None):
    def build(dataset, store, tmp_path):
        from toolkit.labels import write_review

        review_id = write_review(store, list(RUNS), 2, 1, tmp_path / "review.html")
        row = store.read("reviews", keys=[review_id]).row(0, named=True)
        items = store.read("rubric_items")
        item = items.filter(items["case_id"] == row["case_id"])["item_id"][0]
        body = {"format": "bedside-review-labels 1", "review_id": review_id, "reviewer": "dr-d",
                "labels": [{"blind_id": row["blind_id"], "item_id": item, "label": "met", "labelled_at": None}]}
        change(body, items.filter(items["case_id"] != row["case_id"])["item_id"][0])
        text = json.dumps(body)
        if twice is not None:  # a key given twice, the last of them as the export holds it
            last = twice.rpartition(", ")[2]
            assert last in text
            text = text.replace(last, twice, 1)
        return "export.json", text
    return build


def _set(key, value):
    return lambda rows, dataset: rows[1].__setitem__(key, value)


def _other_case_item(rows, dataset):
    rows[1]["item_id"] = next(i for c, i in _items(dataset) if c != rows[1]["case_id"])


MALFORMED = {
    "unknown run": (_bad_table(_set("run_id", "no-such-run")), "line 2: run 'no-such-run' is not in the store"),
    "unknown case": (_bad_table(_set("case_id", "no-such-case")), "line 2: case 'no-such-case' is not a case of run"),
    "unknown item": (_bad_table(_set("item_id", "no-such-item")), "line 2: item 'no-such-item' is not a rubric item"),
    "item of another case": (_bad_table(_other_case_item), "line 2: item "),
    "no such answer sample": (_bad_table(_set("sample", 5)), "line 2: run 'hidden-beta' has no answer to case"),
    "wrong label": (_bad_table(_set("label", "yes")), "line 2: label: 'yes' is not one of met, not_met, unsure"),
    "sample not a number": (_bad_table(_set("sample", 1.5)), "line 2: sample: 1.5 is not a whole number >= 0"),
    "sample a boolean": (_bad_table(_set("sample", True)), "line 2: sample: True is not a whole number >= 0"),
    # str.isdigit() holds for "²" but int() refuses it: one line, not a crash
    "sample a superscript digit": (_bad_table(_set("sample", "²")), "line 2: sample: '²' is not a whole number >= 0"),
    "reviewer not text": (_bad_table(_set("reviewer", 7)), "line 2: reviewer: must be text (got 7)"),
    "time without offset": (_bad_table(_set("labelled_at", "2025-03-01T10:00:00")),
                            "line 2: labelled_at: '2025-03-01T10:00:00' is not an ISO-8601 time with its UTC offset"),
    "unknown column": (_bad_table(_set("model", "x")), "line 2: unknown column 'model'"),
    "time before year 1 in UTC": (_bad_table(_set("labelled_at", "0001-01-01T00:00:00+01:00")),
                                  "line 2: labelled_at: '0001-01-01T00:00:00+01:00' is out of range"),
    "time after year 9999 in UTC": (_bad_table(_set("labelled_at", "9999-12-31T23:59:59-01:00")),
                                    "line 2: labelled_at: '9999-12-31T23:59:59-01:00' is out of range"),
    # JSON keeps the last of a key given twice: which one was meant is the reviewer's to say
    "export label given twice": (_export(lambda body, other: None, twice='"label": "not_met", "label": "met"'),
                                 "export.json: labels[0].label: given twice in one object"),
    "export reviewer given twice": (_export(lambda body, other: None, twice='"reviewer": "dr-e", "reviewer": "dr-d"'),
                                    "export.json: reviewer: given twice in one object"),
    "table row with a key twice": (lambda d, s, t: ("labels.jsonl", "".join(
        json.dumps(r) + "\n" for r in _table_rows(d, 2)).replace('"label": ', '"label": "met", "label": ', 1)),
        "labels.jsonl: line 1: label: given twice in one object"),
    # a reviewer's name is checked as a run id is: one that looks like another is a second physician
    "reviewer with a zero-width space": (_bad_table(_set("reviewer", "dr\u200b-a")),
                                         "line 2: reviewer 'dr\\u200b-a': holds an invisible character (U+200B)"),
    "reviewer in fullwidth letters": (_bad_table(_set("reviewer", "\uff24r-a")),
                                      "line 2: reviewer '\uff24r-a': holds a compatibility form (U+FF24) of"),
    "reviewer with a bidi control": (_bad_table(_set("reviewer", "\u202edr-a")),
                                     "line 2: reviewer '\\u202edr-a': holds a bidirectional-text control"),
    "reviewer with a NUL": (_bad_table(_set("reviewer", "dr\x00a")), "holds a control character (U+0000)"),
    "reviewer with a newline": (_bad_table(_set("reviewer", "dr\na")), "holds a control character (U+000A)"),
    "export reviewer with a zero-width space": (
        _export(lambda body, other: body.__setitem__("reviewer", "dr\u200b-d")),
        "export.json: reviewer 'dr\\u200b-d': holds an invisible character"),
    "duplicate in file": (_bad_table(lambda rows, d: rows.append(dict(rows[0]))),
                          "line 4: reviewer 'dr-b' labels run 'hidden-alpha' case"),
    "not json": (lambda d, s, t: ("labels.jsonl", '{"reviewer": "dr-a",\n'), "labels.jsonl: line 1 column"),
    "another store's review": (_export(lambda body, other: body.__setitem__("review_id", "r0000000000000000")),
                               "review 'r0000000000000000' is not a review of the store"),
    "blind id not in the review": (_export(lambda body, other: body["labels"][0].__setitem__("blind_id", "a0")),
                                   "labels[0]: blind_id 'a0' is not an answer of review"),
    "export item of another case": (_export(lambda body, other: body["labels"][0].__setitem__("item_id", other)),
                                    "labels[0]: item "),
    "export without labels": (_export(lambda body, other: body.__setitem__("labels", [])), "holds no labels"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_file_is_one_line_and_leaves_the_store_unchanged(name: str, two_runs: Store, tmp_path: Path,
                                                                     sample_dataset) -> None:
    build, expected = MALFORMED[name]
    file_name, text = build(sample_dataset, two_runs, tmp_path)
    path = tmp_path / file_name
    path.write_text(text, encoding="utf-8")
    before = snapshot(two_runs.root)
    done = bedside_process(["labels", "import", str(path), "--store", str(two_runs.root)])
    assert done.returncode == 1, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bedside: error: ") and expected in lines[0], lines
    assert snapshot(two_runs.root) == before
    assert read_labels(two_runs).height == 0


def test_a_label_the_store_holds_with_another_value_is_refused(two_runs: Store, tmp_path: Path,
                                                               sample_dataset) -> None:
    rows = _table_rows(sample_dataset, 3)
    import_labels(two_runs, _write_csv(tmp_path / "first.csv", rows))
    rows[2]["label"] = "met" if rows[2]["label"] != "met" else "not_met"
    before = snapshot(two_runs.root)
    done = bedside_process(["labels", "import", str(_write_csv(tmp_path / "second.csv", rows)),
                            "--store", str(two_runs.root)])
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "line 4: reviewer 'dr-b' already labelled run 'hidden-alpha'" in lines[0], lines
    assert snapshot(two_runs.root) == before


def test_a_csv_missing_a_column_is_refused_at_its_header(two_runs: Store, tmp_path: Path, sample_dataset) -> None:
    path = _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 2), ["reviewer", "run_id", "case_id",
                                                                                 "item_id"])
    before = snapshot(two_runs.root)
    done = bedside_process(["labels", "import", str(path), "--store", str(two_runs.root)])
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"bedside: error: {path}: line 1: missing column 'label' (columns: reviewer, "
                                        "run_id, case_id, item_id, label; optional: sample, labelled_at)"]
    assert snapshot(two_runs.root) == before


def test_the_demo_physician_labels_twenty_cases_of_each_run_with_the_simulators_truth(demo_store: Path) -> None:
    import polars as pl

    from toolkit.collect.demo import DEMO_MODELS, DEMO_PHYSICIAN

    store = Store.open(demo_store)
    labels = read_labels(store)
    assert set(labels["reviewer"]) == {DEMO_PHYSICIAN} and set(labels["label"]) == {"met", "not_met"}
    per_run = labels.group_by("run_id").agg(pl.col("case_id").n_unique().alias("cases"),
                                            pl.struct("case_id", "sample").n_unique().alias("answers"))
    assert sorted(per_run.rows()) == sorted((r, 20, 60) for r in DEMO_MODELS)
    assert labels.group_by("case_id").agg(pl.col("run_id").n_unique())["run_id"].to_list() == [4] * 20  # paired
    decisions = store.read("decisions", list(DEMO_MODELS))
    joined = labels.join(decisions, on=["run_id", "case_id", "sample", "item_id"])
    agree = joined.group_by("judge_model").agg(((pl.col("label") == "met") == pl.col("matched")).mean().alias("a"))
    agree = dict(agree.rows())
    assert agree["sim/judge"] == 1.0  # the primary judge reads by the rule the physician's truth comes from
    assert 0.8 < agree["sim/judge-noisy"] < 0.97  # its misreadings and slips: the error the labels measure


def test_labels_are_about_an_answer_and_lapse_when_the_run_is_collected_again(two_runs: Store, tmp_path: Path,
                                                                              sample_dataset) -> None:
    """A run removed and collected again under its id has other answers: labels of the old ones must not
    count for the new ones, and a page written before cannot unblind onto them."""
    from toolkit.labels import LabelsError, write_review
    from toolkit.store.runs_ops import delete_run

    review_id = write_review(two_runs, list(RUNS), 2, 3, tmp_path / "review.html")
    import_labels(two_runs, _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 6)))
    labels = read_labels(two_runs)
    kept = labels.filter(labels["run_id"] == RUNS[1])
    assert 0 < kept.height < labels.height
    key = two_runs.read("reviews", keys=[review_id])
    blind = key.filter(key["run_id"] == RUNS[0])["blind_id"][0]
    delete_run(two_runs, RUNS[0])
    again = answers_store(tmp_path / "again", sample_dataset, samples=2, answer=lambda k, i, s: f"Other {k}.{i}.{s}")
    two_runs.write("runs", RUNS[0], again.read("runs", [RUNS[0]]).to_dicts())
    two_runs.write("answers", RUNS[0], again.read("answers", [RUNS[0]]).to_arrow())
    assert read_labels(two_runs).select(COLUMNS).equals(kept.select(COLUMNS))
    case = key.filter(key["blind_id"] == blind)["case_id"][0]
    items = two_runs.read("rubric_items")
    item = items.filter(items["case_id"] == case)["item_id"][0]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"format": "bedside-review-labels 1", "review_id": review_id, "reviewer": "dr-c",
                                "exported_at": "2025-01-01T00:00:00Z",
                                "labels": [{"blind_id": blind, "item_id": item, "label": "met",
                                            "labelled_at": None}]}), encoding="utf-8")
    with pytest.raises(LabelsError, match="is not an answer of review .*of a run since removed"):
        import_labels(two_runs, path)  # the removal took the run's answers out of the review's key
    # A run that answered a case again (a later attempt) keeps its key: its labels are about the old answer.
    row = key.filter(key["run_id"] == RUNS[1]).row(0, named=True)
    two_runs.write("answers", RUNS[1], [{
        "run_id": RUNS[1], "case_id": row["case_id"], "sample": row["sample"], "attempt": 2, "seq": 1000,
        "answer_model": MODELS[RUNS[1]], "answer": "Another plan.", "started_at": "2025-01-02T00:00:00Z",
        "finished_at": "2025-01-02T00:01:00Z", "error": None}])
    item = items.filter(items["case_id"] == row["case_id"])["item_id"][0]
    path.write_text(json.dumps({"format": "bedside-review-labels 1", "review_id": review_id, "reviewer": "dr-c",
                                "labels": [{"blind_id": row["blind_id"], "item_id": item, "label": "met",
                                            "labelled_at": None}]}), encoding="utf-8")
    with pytest.raises(LabelsError, match="changed since the review page"):
        import_labels(two_runs, path)


def test_a_renamed_run_keeps_its_labels_and_a_removed_one_shows_none(two_runs: Store, tmp_path: Path,
                                                                     sample_dataset) -> None:
    from toolkit.store.runs_ops import delete_run, rename_run

    import_labels(two_runs, _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 6)))
    before = read_labels(two_runs)
    rename_run(two_runs, RUNS[0], "renamed")
    after = read_labels(two_runs)
    moved = before.with_columns(run_id=pl.when(pl.col("run_id") == RUNS[0]).then(pl.lit("renamed"))
                                .otherwise(pl.col("run_id")))
    assert sorted(after.rows()) == sorted(moved.rows())
    delete_run(two_runs, RUNS[1])
    assert set(read_labels(two_runs)["run_id"]) == {"renamed"}


def _export_all(store: Store, review_id: str, path: Path, reviewer: str = "dr-c") -> Path:
    """An export labelling the first rubric item of every answer of the review as met."""
    key = store.read("reviews", keys=[review_id]).sort("position")
    items = store.read("rubric_items")
    labels = [{"blind_id": row["blind_id"], "item_id": items.filter(items["case_id"] == row["case_id"])["item_id"][0],
               "label": "met", "labelled_at": None} for row in key.iter_rows(named=True)]
    path.write_text(json.dumps({"format": "bedside-review-labels 1", "review_id": review_id, "reviewer": reviewer,
                                "exported_at": "2025-01-01T00:00:00Z", "labels": labels}), encoding="utf-8")
    return path


def test_a_page_made_before_a_rename_imports_onto_the_renamed_run(two_runs: Store, tmp_path: Path,
                                                                  sample_dataset) -> None:
    """The rename moves the review's key and the labels: nothing is left under the old id, nothing is copied."""
    from toolkit.labels import write_review

    review_id = write_review(two_runs, list(RUNS), 2, 5, tmp_path / "review.html")
    import_labels(two_runs, _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 6)))
    renamed = bedside_process(["runs", "rename", RUNS[0], "renamed", "--store", str(two_runs.root)])
    assert renamed.returncode == 0, renamed.stderr
    assert set(two_runs.read("human_labels")["run_id"]) == {"renamed", RUNS[1]}  # the raw table: no copy left
    assert set(two_runs.read("reviews", keys=[review_id])["run_id"]) == {"renamed", RUNS[1]}
    done = bedside_process(["labels", "import", str(_export_all(two_runs, review_id, tmp_path / "export.json")),
                            "--store", str(two_runs.root)])
    assert done.returncode == 0, done.stderr
    assert "imported 4 labels" in done.stdout and f"runs {RUNS[1]}, renamed)" in done.stdout
    page = read_labels(two_runs).filter(pl.col("review_id") == review_id)
    assert set(page["run_id"]) == {"renamed", RUNS[1]}
    old = _write_csv(tmp_path / "old.csv", [{**r, "run_id": RUNS[0]} for r in _table_rows(sample_dataset, 2)])
    before = snapshot(two_runs.root)
    refused = bedside_process(["labels", "import", str(old), "--store", str(two_runs.root)])
    assert refused.returncode == 1 and f"run '{RUNS[0]}' is not in the store" in refused.stderr
    assert snapshot(two_runs.root) == before


def test_rm_removes_the_runs_labels_and_its_answers_from_reviews_and_says_so(two_runs: Store, tmp_path: Path,
                                                                             sample_dataset) -> None:
    from toolkit.labels import write_review

    review_id = write_review(two_runs, list(RUNS), 2, 5, tmp_path / "review.html")
    import_labels(two_runs, _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 6)))
    held = two_runs.read("human_labels").filter(pl.col("run_id") == RUNS[0]).height
    done = bedside_process(["runs", "rm", RUNS[0], "--yes", "--store", str(two_runs.root)])
    assert done.returncode == 0, done.stderr
    assert f"{held} labels, 2 answers in 1 review" in done.stdout
    assert f"removed {RUNS[0]} with its {held} labels and its 2 answers in reviews" in done.stdout
    assert set(two_runs.read("human_labels")["run_id"]) == {RUNS[1]}
    assert set(two_runs.read("reviews", keys=[review_id])["run_id"]) == {RUNS[1]}
    again = bedside_process(["runs", "rm", RUNS[1], "--yes", "--store", str(two_runs.root)])
    assert again.returncode == 0, again.stderr
    assert two_runs.read("human_labels").height == 0 and two_runs.read("reviews").height == 0


def test_an_import_whose_run_is_renamed_before_its_commit_is_refused(two_runs: Store, tmp_path: Path,
                                                                     sample_dataset, monkeypatch) -> None:
    """The labels were checked against the old id; the rename lands before their commit: none may land
    under an id no run has (the rename moved the labels it found)."""
    from toolkit.store import StoreError
    from toolkit.store.runs_ops import rename_run

    append = Store.append_rows

    def renamed_first(self, table, rows, keys, check=None):
        rename_run(self, RUNS[0], "renamed")
        return append(self, table, rows, keys, check)

    monkeypatch.setattr(Store, "append_rows", renamed_first)
    with pytest.raises(StoreError, match=f"run '{RUNS[0]}' was renamed or removed meanwhile; import again"):
        import_labels(two_runs, _write_csv(tmp_path / "labels.csv", _table_rows(sample_dataset, 6)))
    assert two_runs.read("human_labels").height == 0


def test_a_reviewer_named_in_nfd_is_the_same_reviewer(two_runs: Store, tmp_path: Path, sample_dataset) -> None:
    """"Émile" typed on two machines (NFC and NFD) is one physician: the second file's labels are the
    first's, skipped, and a different value is refused as from the same reviewer."""
    import unicodedata

    rows = [{**r, "reviewer": "Dr Émile"} for r in _table_rows(sample_dataset, 4)]
    import_labels(two_runs, _write_csv(tmp_path / "nfc.csv", rows))
    twin = [{**r, "reviewer": unicodedata.normalize("NFD", "Dr Émile")} for r in rows]
    again = import_labels(two_runs, _write_csv(tmp_path / "nfd.csv", twin))
    assert (again.added, again.already, again.reviewers) == (0, 4, ("Dr Émile",))
    assert set(two_runs.read("human_labels")["reviewer"]) == {"Dr Émile"}
    twin[0]["label"] = "met" if twin[0]["label"] != "met" else "not_met"
    done = bedside_process(["labels", "import", str(_write_csv(tmp_path / "nfd2.csv", twin)),
                            "--store", str(two_runs.root)])
    assert done.returncode == 1 and "reviewer 'Dr Émile' already labelled" in done.stderr
