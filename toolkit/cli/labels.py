"""``bedside labels [list | import FILE]``: reviewers' labels, from a review page's export or a table."""

from __future__ import annotations

import click

from toolkit.cli.common import emit, open_store, say
from toolkit.cli.options import format_option, store_option


def _list(store_dir: str | None, fmt: str) -> None:
    from toolkit.labels import label_counts

    store = open_store(store_dir)
    counts = label_counts(store)
    if counts.height == 0 and fmt == "table":
        say(f"{store.root}: no labels yet (`bedside review` writes a page to label; `bedside labels import FILE` "
            "stores what it exports)")
        return
    emit(counts, fmt, f"labels in {store.root}")


@click.group("labels", invoke_without_command=True)
@store_option
@format_option
@click.pass_context
def labels(ctx: click.Context, store_dir: str | None, fmt: str) -> None:
    """List reviewers' labels, or import them (a review page's export, or a CSV/JSONL table).

    The list: per run and reviewer, the cases, answers and rubric items labelled and how many are met,
    not_met and unsure.
    """
    ctx.obj = {"store_dir": store_dir, "fmt": fmt}
    if ctx.invoked_subcommand is None:
        _list(store_dir, fmt)


@labels.command("list")
@store_option
@format_option
@click.pass_context
def list_cmd(ctx: click.Context, store_dir: str | None, fmt: str) -> None:
    """Per run and reviewer: cases, answers and items labelled; met, not_met and unsure counts."""
    parent = ctx.obj or {}
    _list(store_dir if store_dir is not None else parent.get("store_dir"),
          fmt if fmt != "table" else parent.get("fmt", fmt))


@labels.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@store_option
@click.pass_context
def import_cmd(ctx: click.Context, file: str, store_dir: str | None) -> None:
    """Import labels: a review page's .json export, or a .csv / .jsonl table.

    A table has the columns reviewer, run_id, case_id, item_id, label (met, not_met or unsure) and
    optionally sample (default 0) and labelled_at. Every label is checked against the store (its run,
    case, answer and item) before anything is written; then all go in one commit. A label the store
    already holds with the same value is skipped, so importing an export again adds only what is new; a
    different value from the same reviewer is refused.
    """
    from toolkit.sql import follow_commits
    follow_commits()  # registered `bedside db` files show the new labels
    from toolkit.labels import import_labels

    store = open_store(store_dir if store_dir is not None else (ctx.obj or {}).get("store_dir"))
    done = import_labels(store, file)
    source = f"review {done.review_id}" if done.review_id else "table"
    skipped = f"; {done.already} already stored, skipped" if done.already else ""
    say(f"imported {done.added} labels from {file} ({source}; reviewers {', '.join(done.reviewers)}; runs "
        f"{', '.join(done.runs)}){skipped}")
