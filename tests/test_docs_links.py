"""Every relative link of README.md and docs/*.md lands on a file that exists and, with an #anchor, on a
heading of that file (anchors as GitHub makes them); every docs page opens with the question it answers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    slugs = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        slugs.add(slug)
    return slugs


def test_relative_links_land() -> None:
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.name}: {target}: no such heading")
    assert not broken, "\n".join(broken)


def test_each_docs_page_opens_with_its_question() -> None:
    for page in PAGES[1:]:
        lines = [line for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert lines[0].startswith("# ") and lines[1].startswith("*") and "?*" in " ".join(lines[1:4]), page.name
