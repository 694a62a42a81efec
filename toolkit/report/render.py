"""Rendering: the HTML page (jinja2, autoescaping on) and the Markdown file (every value escaped for GitHub).

Nothing here builds markup from data by concatenation: values reach the output only through the
templates, where HTML autoescaping or the Markdown ``finalize`` escapes them.
"""

from __future__ import annotations

import base64
import html
import re
from importlib.resources import files

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from toolkit.report.model import case_anchor

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~!{}])")
_MARKS = {"matched": "✓ matched", "missed": "✗ missed", "endorsed": "⚠ endorsed", "avoided": "○ avoided",
          "not matched": "· not matched"}


class MdSafe(str):
    """Markdown already made safe (fenced code, HTML-escaped text in an HTML block): ``finalize`` keeps it."""


def md_escape(value: object) -> str:
    """Inline Markdown text that renders as itself on GitHub: HTML characters as entities, Markdown
    punctuation backslash-escaped, line breaks as spaces (so a table cell stays one cell)."""
    text = html.escape(str(value), quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"\s*[\r\n]+\s*", " ", text)


def md_finalize(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, MdSafe) else md_escape(value)


def fence(value: object, lang: str = "text") -> MdSafe:
    """A fenced code block longer than any backtick run inside, so the text cannot close it."""
    text = str(value).replace("\r\n", "\n")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return MdSafe(f"{bar}{lang}\n{text}\n{bar}")


def html_in_md(value: object) -> MdSafe:
    """Text inside an HTML block of the Markdown (``<summary>``): entity-escaped, Markdown left alone."""
    return MdSafe(re.sub(r"\s*[\r\n]+\s*", " ", html.escape(str(value))))


def _key(value: str) -> MdSafe:
    """A file or anchor key of our own (``figure_leaderboard``): shown as is, never escaped."""
    if not re.fullmatch(r"[a-z0-9_-]+", value):
        raise ValueError(f"report: not a plain key: {value!r}")
    return MdSafe(value)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _env(autoescape: bool) -> Environment:
    env = Environment(loader=PackageLoader("toolkit.report", "templates"), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html.j2"]) if autoescape else False,
                      keep_trailing_newline=True, trim_blocks=autoescape, lstrip_blocks=autoescape,
                      finalize=None if autoescape else md_finalize)
    env.filters["b64"] = _b64
    env.filters["case_anchor"] = case_anchor
    env.filters["fence"] = fence
    env.filters["h"] = html_in_md
    env.filters["key"] = _key
    env.filters["mark_symbol"] = lambda m: MdSafe(_MARKS.get(m, m))
    return env


def css() -> Markup:
    """The stylesheet inlined into the page (our own file, not data)."""
    return Markup(files("toolkit.report").joinpath("templates/style.css").read_text(encoding="utf-8"))


def render_html(context: dict) -> str:
    env = _env(autoescape=True)
    assert env.autoescape("report.html.j2")  # the page must never be rendered without escaping
    return env.get_template("report.html.j2").render(css=css(), **context)


def render_markdown(context: dict) -> str:
    return _tidy(_env(autoescape=False).get_template("report.md.j2").render(**context))


def _tidy(text: str) -> str:
    """At most one blank line in a row (the templates' control lines leave some)."""
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).rstrip("\n") + "\n"
