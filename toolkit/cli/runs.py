"""``bedside runs [rm ID… | rename OLD NEW]``: list, remove and rename the runs of a store."""

from __future__ import annotations

import click

from toolkit.cli.common import echo_json, emit, no_runs_message, open_store, say, warning_line
from toolkit.cli.options import json_option, prices_option, store_option, wide_option
from toolkit.cli.table import COVERAGE
from toolkit.text import visible


@click.group("runs", invoke_without_command=True)
@json_option("Print the list as a JSON array (every field, full times).")
@store_option
@prices_option
@wide_option
@click.pass_context
def runs(ctx: click.Context, as_json: bool, store_dir: str | None, prices_file: str | None) -> None:
    """List, remove, rename and compact the runs of the store.

    The list shows what each run cost: dollars where its models are priced (--prices), else its tokens.
    """
    ctx.obj = {"store_dir": store_dir}
    if ctx.invoked_subcommand is not None:
        return
    import polars as pl

    from toolkit.inputs import dumps
    from toolkit.listing.run_list import list_runs

    store = open_store(store_dir)
    listed = list_runs(store, prices_file)
    if as_json:
        echo_json(dumps(listed, indent=2, ensure_ascii=False))
        return
    if not listed:
        say(no_runs_message(store))
        return
    # The three case counts (of the run's dataset) share one column, so that the judges fit at 80 columns.
    cases = COVERAGE
    frame = pl.DataFrame([{
        "run_id": r["run_id"], "answer_model": r["answer_model"], "judges": r["judges"],
        cases: "damaged" if r["damaged"] else f"{r['completed']} / {r['failed']} / {r['not_attempted']}",
        "cost": "" if r["damaged"] else r["cost"],
        "dataset": r["dataset"], "source": r["source"], "created": r["created"], "updated": r["updated"],
    } for r in listed], schema={c: pl.String for c in ("run_id", "answer_model", "judges", cases, "cost", "dataset",
                                                        "source", "created", "updated")})
    emit(frame, "table", f"runs in {store.root}", optional=("created", "source", "dataset", "updated", "cost"))
    for r in listed:
        if r["damaged"]:
            say(f"{r['run_id']}: damaged: {r['damaged']}")
        elif r["failure_causes"]:
            causes = ", ".join(f"{c['cases']} × {c['cause']}: {c['first_message']}" for c in r["failure_causes"])
            total = sum(c["cases"] for c in r["failure_causes"])
            say(f"{r['run_id']}: {total} case{'s' if total != 1 else ''} failed: {causes}")


def _store(ctx: click.Context, store_dir: str | None):
    return open_store(store_dir if store_dir is not None else (ctx.obj or {}).get("store_dir"))


@runs.command("rm")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="Remove without asking.")
@store_option
@click.pass_context
def rm_cmd(ctx: click.Context, run_ids: tuple[str, ...], yes: bool, store_dir: str | None) -> None:
    """Remove runs (their answers, judgments and decisions, and the human labels and review keys' rows of
    their answers); asks first unless --yes."""
    from toolkit.sql import follow_commits
    follow_commits()  # registered `bedside db` files follow the removal
    from toolkit.listing.run_list import removal_counts
    from toolkit.store.runs_ops import delete_run, label_rows

    store = _store(ctx, store_dir)
    ids = list(dict.fromkeys(run_ids))
    counts = {r: removal_counts(store, r) for r in ids}  # an unknown id stops here: nothing removed
    labelled = {r: label_rows(store, r) for r in ids}
    for run_id, n in counts.items():
        labels, shown, reviews = labelled[run_id]
        extra = "".join([f", {_plural(labels, 'label')}" if labels else "",
                         f", {_plural(shown, 'answer')} in {_plural(reviews, 'review')}" if shown else ""])
        say(f"run {run_id}: {n['answers']} answers, {n['judgments']} judgments, {n['decisions']} decisions{extra}")
    if not yes:
        what = f"{len(ids)} runs" if len(ids) > 1 else f"run {ids[0]!r}"
        try:
            confirmed = click.confirm(visible(f"Remove {what} from {store.root}?"), default=False)
        except click.exceptions.Abort:
            confirmed = False
        if not confirmed:
            say("bedside: nothing removed", err=True)
            raise click.exceptions.Exit(1)
    for run_id in ids:
        delete_run(store, run_id)
        labels, shown, _ = labelled[run_id]
        # Labels and review keys are about the run's answers: kept, they would attach to a run collected again.
        taken = [t for t in (_plural(labels, "label") if labels else "",
                             f"{_plural(shown, 'answer')} in reviews" if shown else "") if t]
        note = " (a review page made before can no longer label its answers)" if shown else ""
        say(f"removed {run_id}" + (f" with its {' and its '.join(taken)}{note}" if taken else ""))


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


@runs.command("rename")
@click.argument("old")
@click.argument("new")
@store_option
@click.pass_context
def rename_cmd(ctx: click.Context, old: str, new: str, store_dir: str | None) -> None:
    """Give a run another id (the new id must not exist); its labels and review keys follow it."""
    from toolkit.sql import follow_commits
    follow_commits()  # registered `bedside db` files follow the rename
    from toolkit.score_tables import store_scores
    store_scores()  # the renamed run's scores are stored in the rename's commit
    from toolkit.store.runs_ops import rename_run

    store = _store(ctx, store_dir)
    rename_run(store, old, new)
    say(f"renamed {old} to {new}")


@runs.command("compact")
@click.option("--vacuum", is_flag=True, help="Then delete the files no store version younger than --retention needs.")
@click.option("--retention", type=click.IntRange(min=0), default=None, metavar="HOURS",
              help="With --vacuum: keep what the versions of the last HOURS hours need (required with --vacuum).")
@store_option
@click.pass_context
def compact_cmd(ctx: click.Context, vacuum: bool, retention: int | None, store_dir: str | None) -> None:
    """Compact the store: each run written in several writes becomes one file per table, and every table's
    log is checkpointed, so files and log entries stay bounded; --vacuum then frees the old files."""
    if vacuum != (retention is not None):
        raise click.UsageError("--vacuum and --retention HOURS go together")
    from toolkit.sql import follow_commits
    follow_commits()  # registered `bedside db` files follow the rewritten runs
    from toolkit.score_tables import store_scores
    store_scores()  # a rewritten run's scores are stored in its commit
    from toolkit.store.maintenance import compact_store

    store = _store(ctx, store_dir)
    if not store.run_ids():  # a mistyped --store is not made into a store here
        from toolkit.store import StoreError

        raise StoreError(no_runs_message(store))
    done = compact_store(store, retention)
    for run_id, why in done.skipped.items():
        warning_line(f"run {run_id!r} not compacted: {why}")
    say(f"compacted {len(done.compacted)} run(s); checkpointed {len(done.checkpointed)} table log(s)"
        + (f"; vacuumed {sum(done.vacuumed.values())} file(s) no version of the last {retention} h needs"
           if vacuum else "; older files stay for time travel until --vacuum --retention HOURS"))
    if done.rescored:
        say(f"stored the scores and listing of {len(done.rescored)} run(s) written without them (readers "
            "no longer compute them)")
