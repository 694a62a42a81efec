"""``bedside review``: write the offline review page of some runs' answers."""

from __future__ import annotations

import click

from toolkit.cli.common import open_store, say
from toolkit.cli.options import store_option


@click.command("review")
@click.option("--run", "run_ids", multiple=True, required=True, help="Run whose answers to review (repeatable).")
@click.option("--cases", type=click.IntRange(1, 10_000), default=20, show_default=True, metavar="N",
              help="Cases to review, drawn at random within benchmarks, spread evenly over them, among those every "
                   "run answered. Corrected scores need 2 labelled cases in every benchmark and 10 in all for an "
                   "interval.")
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=42, show_default=True, metavar="INTEGER",
              help="Seed of the cases drawn and of the order of cases and answers.")
@click.option("--out", "out", type=click.Path(dir_okay=False), default="review.html", show_default=True,
              help="The page to write (one HTML file, outside the store; an existing file only with --replace).")
@click.option("--replace", is_flag=True,
              help="Replace the review page at --out (labels entered in it and not exported are lost); a file "
                   "that is not a review page is always refused.")
@click.option("--reviewer-prompt", "instructions", default=None, metavar="TEXT",
              help="Instructions shown to the reviewers at the top of the page.")
@store_option
def review_cmd(run_ids: tuple[str, ...], cases: int, seed: int, out: str, replace: bool, instructions: str | None,
               store_dir: str | None) -> None:
    """Write an offline review page: reviewers label rubric items of blinded answers.

    The page is one HTML file that works from disk with no network (nothing is fetched); it shows, case by
    case, the question, each run's answer with the model hidden, and the rubric items to mark met, not met
    or unsure, with the keyboard. The work is kept in the reviewer's browser; they export it as a JSON file
    for `bedside labels import`. Which run wrote each answer stays in the store (table reviews). Each case
    shows one answer per run (its lowest answered sample).
    """
    from toolkit.sql import follow_commits
    follow_commits()  # registered `bedside db` files show the new review's rows
    from toolkit.labels import review_at, write_review

    store = open_store(store_dir)
    replaced = review_at(store, out) if replace else None
    review_id = write_review(store, list(run_ids), cases, seed, out, instructions, replace)
    if replaced is not None:  # its reviewers' browsers keep their work under its id, which the new page is not
        labels = store.read("human_labels", columns=["review_id"])
        imported = labels.filter(labels["review_id"] == replaced).height
        say(f"replaced {out} (review {replaced}; {imported} labels imported from it): labels entered in it and not "
            "exported can no longer be exported")
    shown = store.read("reviews", keys=[review_id])
    say(f"wrote {out}: review {review_id}, {shown['case_id'].n_unique()} cases, {shown.height} answers of "
        f"{shown['run_id'].n_unique()} runs (seed {seed})")
    say("next:  open it in a browser, label, export; then `bedside labels import FILE.json`")
