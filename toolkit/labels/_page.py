"""The review page of ``bedside review``: which answers it shows, in which order, and the one HTML file.

The page holds the answers under random ``blind_id``s only; which run, case and sample each one is goes to
the ``reviews`` table in one commit with the page (``write_review``), so the file unblinds nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import random
import re
import secrets
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import polars as pl
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from toolkit.inputs import inside
from toolkit.labels._store import current_answers
from toolkit.selection import read_runs
from toolkit.store import Store, StoreError

MAX_CASES = 10_000  # a page is read by a person: more would be a mistake, not a review
_TITLE = re.compile(rb"<title>BedsideBench review (r[0-9a-f]{16})</title>")  # in a page's first lines


@dataclass(frozen=True)
class Shown:
    """One answer of the page."""

    blind_id: str
    run_id: str
    case_id: str
    sample: int
    answer: str
    answer_sha256: str


def _answers(answers: pl.DataFrame) -> pl.DataFrame:
    """Per run and case, the answer shown: the current answer (``current_answers``) of its lowest sample."""
    return current_answers(answers).sort("sample").unique(["run_id", "case_id"], keep="first")


def choose(store: Store, run_ids: list[str], cases: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame, list[Shown]]:
    """(cases, rubric items, answers in page order): ``cases`` cases answered by every run, drawn and ordered
    by ``seed``, each with one answer per run in an order also drawn by ``seed``."""
    if not run_ids:
        raise StoreError("review: give at least one run")
    if not 1 <= cases <= MAX_CASES:
        raise ValueError(f"review: --cases must be 1 to {MAX_CASES} (got {cases})")
    run_ids = list(dict.fromkeys(store.stored_id(r) for r in run_ids))
    data = read_runs(store, run_ids)
    digests = data.runs["dataset_sha256"].unique().to_list()
    if len(digests) > 1:
        raise StoreError(f"review: runs {', '.join(run_ids)} were graded on {len(digests)} different datasets; "
                         "review runs of one dataset at a time")
    shown = _answers(data.answers)
    counts = shown.group_by("case_id").agg(pl.len().alias("n"))
    both = set(counts.filter(pl.col("n") == len(run_ids))["case_id"].to_list())
    case_rows = data.cases.sort("position")
    eligible = [c for c in case_rows["case_id"].to_list() if c in both]
    if not eligible:
        raise StoreError(f"review: no case has an answer from every run of {', '.join(run_ids)}")
    rng = random.Random(seed)
    picked = draw_cases(case_rows.filter(pl.col("case_id").is_in(eligible)), cases, rng)
    by_key = {(r["run_id"], r["case_id"]): r for r in shown.to_dicts()}
    used: set[str] = set()
    out: list[Shown] = []
    for case_id in picked:
        for run_id in rng.sample(run_ids, len(run_ids)):
            row = by_key[(run_id, case_id)]
            out.append(Shown(_blind(used), run_id, case_id, row["sample"], row["answer"], row["answer_sha256"]))
    return case_rows, data.rubric_items, out


def draw_cases(case_rows: pl.DataFrame, n: int, rng: random.Random) -> list[str]:
    """``n`` case ids drawn at random within benchmarks, as evenly over the benchmarks as they allow (round
    by round, one case of each benchmark in a random order), in a random order. Corrected scores are
    estimated per benchmark and need labelled cases in each; within a benchmark the draw is a simple random
    sample, which their intervals assume."""
    groups: dict[str, list[str]] = {}
    for case_id, benchmark in case_rows.select("case_id", "benchmark").iter_rows():
        groups.setdefault(benchmark, []).append(case_id)
    queues = [rng.sample(ids, len(ids)) for ids in groups.values()]
    picked: list[str] = []
    while len(picked) < n and any(queues):
        for queue in rng.sample(queues, len(queues)):
            if queue and len(picked) < n:
                picked.append(queue.pop())
    rng.shuffle(picked)
    return picked


def _blind(used: set[str]) -> str:
    """A random id no other answer of the page has (not drawn from the seed: knowing it unblinds nothing)."""
    while (found := f"a{secrets.token_hex(5)}") in used:
        pass
    used.add(found)
    return found


def page_data(review_id: str, created_at: str, cases: pl.DataFrame, items: pl.DataFrame, shown: list[Shown],
              instructions: str | None) -> dict:
    """What the page's script reads: the cases in page order, each with its rubric and blinded answers."""
    prompts = dict(zip(cases["case_id"].to_list(), cases["prompt"].to_list()))
    rubric: dict[str, list[dict]] = {}
    for row in items.sort("item_index").iter_rows(named=True):
        rubric.setdefault(row["case_id"], []).append(
            {"item_id": row["item_id"], "text": row["text"], "points": row["points"]})
    page_cases: list[dict] = []
    for s in shown:
        if not page_cases or page_cases[-1]["case_id"] != s.case_id:
            page_cases.append({"case_id": s.case_id, "prompt": prompts[s.case_id], "items": rubric.get(s.case_id, []),
                               "answers": []})
        page_cases[-1]["answers"].append({"blind_id": s.blind_id, "text": s.answer})
    return {"format": "bedside-review 1", "review_id": review_id, "created_at": created_at,
            "instructions": instructions or "", "cases": page_cases}


def script_json(value: object) -> Markup:
    """JSON for a ``<script type="application/json">`` block: every ``<``, ``>`` and ``&`` (and the two
    line separators JavaScript once refused) as ``\\u`` escapes, so no text in it can end the block."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return Markup(text)


def _asset(name: str) -> str:
    return files("toolkit.labels").joinpath(f"templates/{name}").read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def render_page(data: dict) -> str:
    """The page: its script and stylesheet inline, each allowed by its hash and nothing else by the CSP."""
    env = Environment(loader=PackageLoader("toolkit.labels", "templates"), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html.j2"]), keep_trailing_newline=True)
    assert env.autoescape("review.html.j2")  # the page is never rendered without escaping
    script, style = _asset("review.js"), _asset("review.css")
    return env.get_template("review.html.j2").render(
        data=script_json(data), script=Markup(script), style=Markup(style), script_hash=_hash(script),
        style_hash=_hash(style), review_id=data["review_id"], instructions=data["instructions"])


def _still_runs(store: Store, shown: list[Shown]) -> None:
    """Under the store's lock: the runs shown are still there (a rename or removal rewrites keys under it)."""
    gone = [r for r in dict.fromkeys(s.run_id for s in shown) if not store.has_run(r)]
    if gone:
        raise StoreError(f"review: run {gone[0]!r} was renamed or removed meanwhile; write the review again")


def review_at(store: Store, out: str | os.PathLike[str]) -> str | None:
    """The review id of the review page at ``out`` (None: no file there); ValueError (one line) for a path
    inside the store, and for an existing file that is not a review page (refused as ``db --out`` refuses
    a file that is not its database: by what the file begins with)."""
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"{out}: is a directory; give --out a file name such as review.html")
    if not out.parent.is_dir():
        raise ValueError(f"{out.parent}: no such directory")
    if not store.is_remote and inside(Path(store.root).resolve(), out):
        raise ValueError(f"{out}: --out: inside the store {store.root}; write the page outside it")
    if not out.exists() and not out.is_symlink():
        return None
    try:
        with out.open("rb") as handle:
            head = handle.read(4096) if out.is_file() else b""
    except OSError as error:
        raise ValueError(f"{out}: --out: cannot read it ({error.strerror})") from None
    found = _TITLE.search(head)
    if found is None:
        raise ValueError(f"{out}: --out: exists and is not a review page; refusing to replace it (give a new file "
                         "name)")
    return found.group(1).decode("ascii")


def write_review(store: Store, run_ids: list[str], cases: int, seed: int, out: str | os.PathLike[str],
                 instructions: str | None = None, replace: bool = False) -> str:
    """Write the review page to ``out`` and its unblinding key to the store's ``reviews`` table; the new
    review id. Nothing is left half-written: the page is written beside ``out`` first, the store commits,
    then the page takes its name (a failed commit leaves neither). An existing file at ``out`` is replaced
    only when it is a review page and ``replace`` is given (``review_at``)."""
    out = Path(out)
    replaced = review_at(store, out)
    if replaced is not None and not replace:
        raise ValueError(f"{out}: --out: a review page (review {replaced}) is there; replacing it loses the labels "
                         "entered in it and not exported: give --replace to replace it, or a new file name")
    case_rows, items, shown = choose(store, run_ids, cases, seed)
    review_id = f"r{secrets.token_hex(8)}"
    created_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    html = render_page(page_data(review_id, created_at, case_rows, items, shown, instructions))
    rows = [{"review_id": review_id, "created_at": created_at, "seed": seed, "position": i, "blind_id": s.blind_id,
             "run_id": s.run_id, "case_id": s.case_id, "sample": s.sample, "answer_sha256": s.answer_sha256}
            for i, s in enumerate(shown)]
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(html, encoding="utf-8")
        store.append_rows("reviews", rows, [review_id] * len(rows), check=lambda: _still_runs(store, shown))
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
    return review_id
