"""Opening a report in headless Chromium with the network blocked, for the browser test and the README
screenshot: ``python -m tests.report_browser REPORT/index.html OUT.png`` shoots a report, and
``python -m tests.report_browser STORE OUT.png [TITLE]`` builds the store's report first."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path(os.environ.get("BEDSIDE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
INSTALL_HINT = "Chromium is needed for the browser test: apt-get install chromium"


@dataclass
class PageVisit:
    """What happened while the page was open."""

    blocked: list[str] = field(default_factory=list)  # every non-file request (aborted)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    checks: dict = field(default_factory=dict)  # results of the page's own evaluation


def visit(html: Path, evaluate: str | None = None, width: int = 1280, height: int = 900,
          full_page: bool = False) -> PageVisit:
    """Open ``html`` via file:// with every other request aborted and recorded; screenshot it."""
    from playwright.sync_api import sync_playwright

    out = PageVisit()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=True)

            def route(r):  # noqa: ANN001 - playwright's Route
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    out.blocked.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: out.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: out.page_errors.append(str(e)))
            page.goto(html.resolve().as_uri(), wait_until="load")
            page.wait_for_timeout(300)
            if evaluate:
                out.checks = page.evaluate(evaluate)
            out.screenshot = page.screenshot(full_page=full_page)
        finally:
            browser.close()
    return out


def main(argv: list[str]) -> int:
    from toolkit.report import ReportOptions, write_report

    source, png = Path(argv[0]), Path(argv[1])
    if source.suffix == ".html":
        page = source
    else:
        page = write_report(source, None, png.parent / ".screenshot-report",
                            ReportOptions(title=argv[2] if len(argv) > 2 else None)).html
    shot = visit(page, width=1280, height=1500)
    png.write_bytes(shot.screenshot)
    print(f"{png} ({len(shot.screenshot)} bytes); blocked requests: {len(shot.blocked)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
