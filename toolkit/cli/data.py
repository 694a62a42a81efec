"""``bedside dataset``: inspect and validate a dataset."""

from __future__ import annotations

import json

import click

from toolkit.cli.common import CommandError, echo_json, say
from toolkit.cli.options import dataset_argument, json_option
from toolkit.dataset import load_dataset, validate_dataset


@click.group()
def dataset() -> None:
    """Inspect and validate a BedsideBench dataset (checkout or case file)."""


@dataset.command("info")
@dataset_argument
@json_option("Print a JSON object.")
def info(dataset_path: str | None, as_json: bool) -> None:
    """Digest, case and item counts per benchmark.

    PATH (or --dataset PATH): the dataset checkout or case file."""
    ds = load_dataset(dataset_path)
    items = ds.rubric_items.group_by("benchmark").len()
    per_items = dict(items.iter_rows())
    payload = {
        "source": str(ds.source),
        "dataset_sha256": ds.sha256,
        "cases": len(ds.raw_cases),
        "rubric_items": ds.rubric_items.height,
        "benchmarks": ds.benchmarks,
        "rubric_items_per_benchmark": {b: per_items[b] for b in ds.benchmarks},
        "grading_methods": dict(ds.cases.group_by("grading_method").len().sort("grading_method").iter_rows()),
    }
    if as_json:
        echo_json(json.dumps(payload, indent=2))
        return
    say(f"dataset  {payload['source']}\nsha256   {ds.sha256}\ncases    {payload['cases']}  "
               f"rubric items {payload['rubric_items']}")
    for name, count in ds.benchmarks.items():
        say(f"  {name:<26} {count:>4} cases  {per_items[name]:>5} items")


@dataset.command("validate")
@dataset_argument
def validate(dataset_path: str | None) -> None:
    """Exit 0 when valid; otherwise one line per problem, naming file and field.

    PATH (or --dataset PATH): the dataset checkout or case file."""
    problems = validate_dataset(dataset_path)
    if problems:
        raise CommandError([str(p) for p in problems])
    ds = load_dataset(dataset_path)
    say(f"ok: {len(ds.raw_cases)} cases, {ds.rubric_items.height} rubric items, sha256 {ds.sha256}")
