"""``bedside audit FILE --dataset P``: every disagreement in a published reference result file."""

from __future__ import annotations

import click

from toolkit.reference import audit_file
from toolkit.cli.common import echo_json, say
from toolkit.cli.options import dataset_option, json_option
from toolkit.inputs import dumps


@click.command("audit")
@click.argument("file", type=click.Path(dir_okay=False))
@dataset_option(required_help="The dataset the file claims to grade (checkout or case file; default: "
                              "$BEDSIDE_DATASET).")
@json_option("Print the report as one JSON object.")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Problems listed at most (all are counted).")
def audit_cmd(file: str, dataset_path: str, as_json: bool, limit: int) -> None:
    """Check a reference result file and its summary against the rubric and dataset; list every disagreement."""
    report = audit_file(file, dataset_path, limit=limit)
    if as_json:
        echo_json(dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        for problem in report.problems:
            say(str(problem))
        summary = f"summary {report.summary_path} checked" if report.summary_path else "no summary beside it"
        counts = (f"{report.rows} rows, {report.completed_cases} of {report.dataset_cases} dataset cases completed, "
                  f"{summary}")
        if report.ok:
            say(f"{file}: no problem found: {counts}")
        else:
            more = f" ({report.problem_count - len(report.problems)} not listed)" \
                if report.problem_count > len(report.problems) else ""
            say(f"bedside: audit: {report.problem_count} problem(s){more} in {file}: {counts}", err=True)
    if not report.ok:
        raise click.exceptions.Exit(1)

