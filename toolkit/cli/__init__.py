"""The ``bedside`` command line: a thin layer over the Python API."""

from __future__ import annotations

import sys

import click

from toolkit.cli.common import run_safely
from toolkit.cli.data import dataset
from toolkit.cli.results import export_cmd, import_cmd, sql_cmd, summary_cmd
from toolkit.cli.analysis import agreement_cmd, compare_cmd, harms_cmd, items_cmd
from toolkit.cli.sim import sim
from toolkit.cli.collect import demo_cmd, judge_cmd, run_cmd
from toolkit.cli.report import report_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bedside")
def cli() -> None:
    """bedside: collect, score and analyse BedsideBench evaluations.

    Not for clinical use: BedsideBench scores evaluate AI systems; they are not medical advice.
    """


cli.add_command(dataset)
cli.add_command(import_cmd)
cli.add_command(export_cmd)
cli.add_command(summary_cmd)
cli.add_command(sql_cmd)
cli.add_command(compare_cmd)
cli.add_command(items_cmd)
cli.add_command(harms_cmd)
cli.add_command(agreement_cmd)
cli.add_command(sim)
cli.add_command(run_cmd)
cli.add_command(judge_cmd)
cli.add_command(demo_cmd)
cli.add_command(report_cmd)


def main(argv: list[str] | None = None) -> int:
    return run_safely(cli, argv if argv is not None else sys.argv[1:])
