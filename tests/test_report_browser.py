"""The report in a real browser: headless Chromium opens index.html from file:// with every other request
aborted. The page renders (a non-blank screenshot), nothing leaves the page, the console stays clean, and
the hostile answers, prompts, rubric texts and run id of tests/report_store.py stay inert text."""

from __future__ import annotations

import io

import pytest

from tests.report_browser import visit
from tests.report_store import EVIL_RUN, SCRIPT, build
from toolkit.report import ReportOptions, write_report

CHECKS = """() => ({
    pwned: window.__pwned === undefined ? null : window.__pwned,
    scripts: document.querySelectorAll('script').length,
    badImages: Array.from(document.images).filter(i => !i.src.startsWith('data:image/png;base64,')).length,
    figures: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,
    withHandlers: Array.from(document.querySelectorAll('*')).filter(e => e.hasAttribute('onerror')).length,
    text: document.body.innerText,
    sections: Array.from(document.querySelectorAll('section[id]')).map(s => s.id),
    openable: document.querySelectorAll('details.case').length,
})"""


def test_report_renders_offline_and_hostile_text_stays_inert(chromium, tmp_path, sample_dataset):
    store = build(tmp_path / "store", sample_dataset)
    paths = write_report(store, None, tmp_path / "report", ReportOptions(samples=400))
    seen = visit(paths.html, CHECKS, width=1280, height=1000)

    assert seen.blocked == [], f"requests left the page: {seen.blocked}"
    assert seen.console_errors == [] and seen.page_errors == []
    checks = seen.checks
    assert checks["pwned"] is None, "a payload ran"
    assert checks["scripts"] == 0 and checks["withHandlers"] == 0 and checks["badImages"] == 0
    assert checks["figures"] == len(paths.figures) >= 8  # every embedded figure decoded
    assert SCRIPT in checks["text"] and EVIL_RUN in checks["text"]  # shown as literal text
    assert {"summary", "reproducibility", "leaderboard", "pairwise", "differ", "warnings"} <= set(checks["sections"])
    assert checks["openable"] > 0

    from PIL import Image

    shot = Image.open(io.BytesIO(seen.screenshot)).convert("L")
    assert shot.size == (1280, 1000)
    low, high = shot.getextrema()
    assert high - low > 100 and len(shot.getcolors(256) or []) > 20, "blank screenshot"
