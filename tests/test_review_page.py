"""The review page of ``bedside review`` in a real browser (headless Chromium, file://, every other request
aborted and recorded): labelled with the keyboard only, reloaded, exported, and imported; hostile answer and
rubric text stay inert; the page names no run and no model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.report_browser import CHROMIUM, CHROMIUM_ARGS
from tests.test_cli_process import bedside_process
from tests.test_labels_import import MODELS, RUNS, answers_store
from toolkit.labels import read_labels
from toolkit.labels._page import script_json
from toolkit.store import Store

KEYS = ("1", "n", "u", "m", "2", "3")  # met, not_met, unsure, met, not_met, unsure
VALUE = {"1": "met", "m": "met", "2": "not_met", "n": "not_met", "3": "unsure", "u": "unsure"}
BREAKOUT = "</script><script>window.__pwned = 4; alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned = 5">'


class Browser:
    """One Chromium context on file:// pages: non-file requests aborted and kept, dialogs and errors kept."""

    def __init__(self, playwright, downloads: Path):
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        self.context = self.browser.new_context(accept_downloads=True, viewport={"width": 1200, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def _route(self, route) -> None:  # noqa: ANN001 - playwright's Route
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def data(self) -> dict:
        return self.page.evaluate("() => JSON.parse(document.getElementById('review-data').textContent)")

    def close(self) -> None:
        self.browser.close()


def _review(store: Store, out: Path, cases: int, *runs: str) -> str:
    args = ["review", *(a for r in runs for a in ("--run", r)), "--cases", str(cases), "--seed", "3",
            "--out", str(out), "--store", str(store.root)]
    done = bedside_process(args)
    assert done.returncode == 0, done.stderr
    return re.search(r"review (r[0-9a-f]+)", done.stdout).group(1)


def test_labels_made_with_the_keyboard_survive_a_reload_and_import_exactly(chromium, tmp_path: Path,
                                                                         sample_dataset) -> None:
    from playwright.sync_api import sync_playwright

    store = answers_store(tmp_path / "store", sample_dataset)
    page_file = tmp_path / "review.html"
    review_id = _review(store, page_file, 5, *RUNS)
    html = page_file.read_text(encoding="utf-8")
    assert not any(secret in html for secret in (*RUNS, *MODELS.values()))  # blinded: the key is in the store
    want: dict[tuple[str, str], str] = {}
    with sync_playwright() as p:
        b = Browser(p, tmp_path)
        try:
            b.page.goto(page_file.resolve().as_uri(), wait_until="load")
            b.page.keyboard.type("Dr Keys")  # the name field has the focus while no name is given
            b.page.keyboard.press("Enter")
            data = b.data()
            assert len(data["cases"]) == 5 and all(len(c["answers"]) == 2 for c in data["cases"])
            presses = 0
            for case in data["cases"]:
                for answer in case["answers"]:
                    for item in case["items"]:
                        key = KEYS[presses % len(KEYS)]
                        b.page.keyboard.press(key)
                        want[(answer["blind_id"], item["item_id"])] = VALUE[key]
                        presses += 1
                    b.page.keyboard.press("l")
            # back one answer (h), down and up an item (j, k), clear its first item (0); on to the last answer
            # (ArrowRight), its second item (ArrowDown) made unsure (3)
            last = data["cases"][-1]
            for key in ("h", "j", "k", "0", "ArrowRight", "ArrowDown", "3"):
                b.page.keyboard.press(key)
            want.pop((last["answers"][0]["blind_id"], last["items"][0]["item_id"]))
            want[(last["answers"][1]["blind_id"], last["items"][1]["item_id"])] = "unsure"
            b.page.reload(wait_until="load")
            shown = b.page.inner_text("#progress-text")
            assert f"{len(want)} of {sum(len(c['items']) * 2 for c in data['cases'])} items labelled" in shown
            assert b.page.input_value("#reviewer") == "Dr Keys"
            assert b.page.locator("button[aria-pressed=true]").count() == len(last["items"])  # the last answer's
            assert b.page.locator("li.current").count() == 1
            with b.page.expect_download() as download:
                b.page.keyboard.press("e")
            exported = tmp_path / download.value.suggested_filename
            download.value.save_as(exported)
            assert b.blocked == [] and b.errors == [] and b.dialogs == []
        finally:
            b.close()
    body = json.loads(exported.read_text(encoding="utf-8"))
    assert body["review_id"] == review_id and body["reviewer"] == "Dr Keys"
    assert {(x["blind_id"], x["item_id"]): x["label"] for x in body["labels"]} == want
    done = bedside_process(["labels", "import", str(exported), "--store", str(store.root)])
    assert done.returncode == 0, done.stderr
    assert f"imported {len(want)} labels" in done.stdout
    key = {r["blind_id"]: r for r in store.read("reviews", keys=[review_id]).iter_rows(named=True)}
    expected = sorted((review_id, "Dr Keys", key[b]["run_id"], key[b]["case_id"], key[b]["sample"], i, label)
                      for (b, i), label in want.items())
    stored = read_labels(store)
    assert sorted(stored.drop("labelled_at", "answer_sha256").iter_rows()) == expected
    assert stored["labelled_at"].null_count() == 0


def test_hostile_answers_and_rubric_text_stay_inert_text(chromium, tmp_path: Path, sample_dataset) -> None:
    from playwright.sync_api import sync_playwright

    from tests.report_store import hostile_dataset

    dataset = hostile_dataset(sample_dataset)  # every prompt and rubric item carries script and img payloads
    dataset = dataset.__class__(**{**dataset.__dict__, "rubric_items": dataset.rubric_items.with_columns(
        text=dataset.rubric_items["text"] + " " + IMG)})
    store = answers_store(tmp_path / "store", dataset, answer=lambda k, i, s: f"Plan {k}.{i}: {BREAKOUT} {IMG} &amp;")
    page_file = tmp_path / "review.html"
    _review(store, page_file, 2, *RUNS)
    html = page_file.read_text(encoding="utf-8")
    assert html.count("<script") == 2 and "</script><script>window.__pwned" not in html
    with sync_playwright() as p:
        b = Browser(p, tmp_path)
        try:
            b.page.goto(page_file.resolve().as_uri(), wait_until="load")
            b.page.keyboard.press("Enter")
            texts = []
            for _ in range(4):
                texts.append(b.page.inner_text("main"))
                b.page.keyboard.press("l")
            checks = b.page.evaluate("""() => ({
                pwned: window.__pwned === undefined ? null : window.__pwned,
                scripts: document.querySelectorAll('script').length,
                images: document.images.length,
                handlers: Array.from(document.querySelectorAll('*')).filter(e => e.hasAttribute('onerror')).length,
            })""")
            assert b.blocked == [] and b.dialogs == [] and b.errors == []
        finally:
            b.close()
    assert checks == {"pwned": None, "scripts": 2, "images": 0, "handlers": 0}
    assert all(BREAKOUT in t and IMG in t and "&amp;" in t for t in texts)  # shown literally, every answer


def test_the_data_block_cannot_be_closed_by_its_text() -> None:
    text = script_json({"a": "</script><!-- <script> & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(str(text)) == {"a": "</script><!-- <script> & \u2028"}


def test_a_failed_store_commit_leaves_no_page_and_no_review(tmp_path: Path, sample_dataset, monkeypatch) -> None:
    from toolkit.labels import write_review
    from toolkit.store import StoreError

    store = answers_store(tmp_path / "store", sample_dataset)

    def refuse(*args, **kwargs):
        raise StoreError("disk full (simulated)")

    monkeypatch.setattr(Store, "append_rows", refuse)
    with pytest.raises(StoreError):
        write_review(store, list(RUNS), 3, 1, tmp_path / "review.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert store.read("reviews").height == 0


def test_a_review_of_an_unknown_run_or_too_many_cases_is_one_line(tmp_path: Path, sample_dataset) -> None:
    store = answers_store(tmp_path / "store", sample_dataset)
    done = bedside_process(["review", "--run", "nope", "--out", str(tmp_path / "r.html"), "--store", str(store.root)])
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "no run 'nope'" in done.stderr
    assert not (tmp_path / "r.html").exists()
    many = bedside_process(["review", "--run", RUNS[0], "--cases", "500", "--out", str(tmp_path / "r.html"),
                            "--store", str(store.root)])
    assert many.returncode == 0, many.stderr
    assert f"{sample_dataset.cases.height} cases, {sample_dataset.cases.height} answers of 1 runs" in many.stdout


def test_a_review_draws_its_cases_within_benchmarks_spread_over_them() -> None:
    """Corrected scores are estimated per benchmark: 20 cases of 10 benchmarks of 3 are 2 of each, in a
    random order; with fewer cases than benchmarks no benchmark gets two."""
    import random

    import polars as pl

    from toolkit.labels import draw_cases

    rows = pl.DataFrame({"case_id": [f"c{i}" for i in range(30)], "benchmark": [f"b{i % 10}" for i in range(30)]})
    bench = dict(zip(rows["case_id"], rows["benchmark"]))
    for seed in range(20):
        picked = draw_cases(rows, 20, random.Random(seed))
        assert len(set(picked)) == 20
        assert sorted(pl.Series([bench[c] for c in picked]).value_counts()["count"].to_list()) == [2] * 10
        few = draw_cases(rows, 7, random.Random(seed))
        assert len({bench[c] for c in few}) == 7
    seen = {tuple(draw_cases(rows, 20, random.Random(s))) for s in range(20)}
    assert len(seen) == 20  # the seed decides which cases and their order
    assert len(draw_cases(rows, 50, random.Random(1))) == 30


def test_review_out_refuses_the_store_and_other_files_and_replaces_a_page_only_when_told(
        tmp_path: Path, sample_dataset) -> None:
    """--out into the store (its own Delta log, say) or onto a file that is no review page is refused, the
    file unchanged; a review page reviewers may still be working in is replaced only with --replace, and
    the output says what is lost."""
    from tests.conftest import snapshot
    from tests.test_labels_import import _export_all

    store = answers_store(tmp_path / "store", sample_dataset)
    log = sorted((store.root / "runs" / "_delta_log").glob("*.json"))[0]
    notes = tmp_path / "notes.txt"
    notes.write_text("a reviewer's notes\n", encoding="utf-8")

    def review(out: Path, *more: str):
        return bedside_process(["review", "--run", RUNS[0], "--cases", "2", "--out", str(out), *more,
                                "--store", str(store.root)])

    before = snapshot(tmp_path)
    for out, expected in ((log, "inside the store"), (store.root / "page.html", "inside the store"),
                          (notes, "exists and is not a review page")):
        done = review(out)
        assert done.returncode == 1, done.stdout
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and expected in lines[0], lines
        assert snapshot(tmp_path) == before  # the refused file, and the store, unchanged
    page = tmp_path / "review.html"
    first = _review(store, page, 2, RUNS[0])
    bedside_process(["labels", "import", str(_export_all(store, first, tmp_path / "export.json")),
                     "--store", str(store.root)])
    text = page.read_bytes()
    refused = review(page)
    assert refused.returncode == 1 and f"a review page (review {first})" in refused.stderr
    assert "--replace" in refused.stderr and page.read_bytes() == text
    replaced = review(page, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert (f"replaced {page} (review {first}; 2 labels imported from it): labels entered in it and not exported "
            "can no longer be exported") in replaced.stdout
    assert first not in page.read_text(encoding="utf-8")
