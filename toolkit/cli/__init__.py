"""The ``bedside`` command line: a thin layer over the Python API.

Commands are loaded on use: each command's module is imported only when that command runs (or
its own ``--help`` is asked for), so ``bedside --version`` and ``--help`` import neither polars,
the openai SDK nor aiohttp, and an analysis command never pays for the collector's web stack.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import Any

import click

# command name -> ("module:attribute", short help shown by ``bedside --help``). One line per command;
# the short help must equal the command's own (tests/test_imports.py checks it).
COMMANDS: dict[str, tuple[str, str]] = {
    "dataset": ("toolkit.cli.data:dataset", "Inspect and validate a BedsideBench dataset (checkout or case file)."),
    "import": ("toolkit.cli.results:import_cmd", "Import reference-runner result files (JSONL) as runs, one run per file, each all or nothing."),
    "export": ("toolkit.cli.results:export_cmd", "Write a run as reference-format JSONL plus <out>.summary.json."),
    "summary": ("toolkit.cli.results:summary_cmd",
                "Reference summaries: means and 95% bootstrap intervals per benchmark and overall."),
    "db": ("toolkit.cli.db:db_cmd", "Write a DuckDB database file whose views read the store: tables and derived views, for duckdb, DBeaver or a BI tool."),
    "sql": ("toolkit.cli.results:sql_cmd", "Run one read-only SQL statement over the store's tables and score views."),
    "compare": ("toolkit.cli.analysis:compare_cmd",
                "Leaderboard with intervals, paired differences of every two runs (Holm/BH-adjusted p) and rank "
                "intervals."),
    "items": ("toolkit.cli.analysis:items_cmd",
              "Rubric items: most missed positive items, most endorsed negative items, match rates by points, and "
              "item discrimination across runs."),
    "harms": ("toolkit.cli.analysis:harms_cmd",
              "Harm analysis of the f1_weighted_rubric benchmarks: weighted precision/recall, severe omissions and "
              "commissions, omission vs commission share of errors, with intervals."),
    "agreement": ("toolkit.cli.analysis:agreement_cmd",
                  "Agreement between the judge passes / judges of each run: percent agreement, Cohen's and Fleiss' "
                  "kappa, Krippendorff's alpha, score differences and the cases that flip most."),
    "calibrate": ("toolkit.cli.calibrate:calibrate_cmd",
                  "The judge against physician labels: accuracy per item class, and scores corrected by the labels."),
    "variance": ("toolkit.cli.variance:variance_cmd",
                 "Variance budget: case, answer and judge variance of a case score with intervals, their shares of "
                 "the run mean's variance, the run's intervals, worst-at-k and pass^k."),
    "sim": ("toolkit.cli.sim:sim", "A simulated model provider for demos and tests (no network beyond loopback)."),
    "run": ("toolkit.cli.collect:run_cmd",
            "Answer every selected case with a model and judge the answers; resumes where it stopped."),
    "judge": ("toolkit.cli.collect:judge_cmd",
              "Judge a run's stored answers again or with another judge, without regenerating them."),
    "demo": ("toolkit.cli.collect:demo_cmd",
             "Offline demo: four simulated models on the bundled sample, graded by a simulated judge."),
    "audit": ("toolkit.cli.audit:audit_cmd", "Check a reference result file and its summary against the rubric and dataset; list every disagreement."),
    "runs": ("toolkit.cli.runs:runs", "List, remove, rename and compact the runs of the store."),
    "plan": ("toolkit.cli.plan:plan_cmd",
             "Plan the cheapest design (cases, answers per case, judge passes) that detects a difference."),
    "review": ("toolkit.cli.review:review_cmd",
               "Write an offline review page: reviewers label rubric items of blinded answers."),
    "labels": ("toolkit.cli.labels:labels",
               "List reviewers' labels, or import them (a review page's export, or a CSV/JSONL table)."),
    "report": ("toolkit.cli.report:report_cmd",
               "Write a comparison report: index.html (one self-contained file), report.md, figures/, tables/."),
}


# ``bedside --help`` lists the commands under these headings, in this order (a command not named here is
# listed under "Other").
GROUPS: dict[str, tuple[str, ...]] = {
    "Collect": ("demo", "run", "judge", "import", "sim"),
    "Analyse": ("compare", "items", "harms", "agreement", "calibrate", "variance", "plan"),
    "Show": ("summary", "report", "sql", "db", "export"),
    "Manage": ("runs", "dataset", "audit"),
    "Review": ("review", "labels"),
}

# The one example each command's --help ends with ("" is the top level; "runs rm" a subcommand). The
# examples use the demo's runs where they can, so they work after ``make demo``; docs/cli.md shows them.
EXAMPLES: dict[str, str] = {
    "": "bedside demo && bedside compare --all",
    "demo": "bedside demo",
    "run": "bedside run --answer-model gpt-5.4-mini --judge-model gpt-5.6-sol --smoke",
    "judge": "bedside judge --run gpt-5.4-mini --judge-model other-judge --judge-passes 2",
    "import": "bedside import results/gpt-x.jsonl --run-id gpt-x --dataset path/to/bedside-bench",
    "sim": "bedside sim serve --port 8000",
    "sim serve": "bedside sim serve --port 8000 --latency-ms 200 --rate-429 0.2",
    "compare": "bedside compare --all --baseline sim/strong",
    "items": "bedside items --all --top 10",
    "harms": "bedside harms --all",
    "agreement": "bedside agreement --run sim/strong",
    "calibrate": "bedside calibrate --run sim/strong --run sim/weak",
    "variance": "bedside variance --run sim/strong",
    "plan": "bedside plan --target-mdd 0.1 --run sim/medium --run sim/weak --answer-cost 0.004 --judge-cost 0.002 "
            "--max-cases 500",
    "summary": "bedside summary --all --order dataset",
    "report": "bedside report --all",
    "sql": "bedside sql \"select run_id, overall_macro_mean from run_summary\"",
    "db": "bedside db --out results.duckdb",
    "export": "bedside export --run sim/strong --out out/sim-strong.jsonl",
    "runs": "bedside runs",
    "runs rm": "bedside runs rm sim/skill-0.45 --yes",
    "runs rename": "bedside runs rename sim/weak sim/weak-v1",
    "runs compact": "bedside runs compact --vacuum --retention 168",
    "dataset": "bedside dataset validate --dataset path/to/bedside-bench",
    "dataset info": "bedside dataset info --json",
    "dataset validate": "bedside dataset validate path/to/bedside-bench",
    "audit": "bedside audit out/gpt-x.jsonl --dataset path/to/bedside-bench",
    "review": "bedside review --run sim/strong --run sim/weak --cases 5 --out review.html",
    "labels": "bedside labels",
    "labels list": "bedside labels list --format csv",
    "labels import": "bedside labels import labels-r1234-ann.json",
}


def example_epilog(path: str) -> str | None:
    """The help's closing example; ``\\b`` keeps click from rewrapping the command line."""
    example = EXAMPLES.get(path)
    return None if example is None else f"\b\nExample:\n  {example}"


def _with_examples(command: click.Command, path: str) -> click.Command:
    """The command (and its subcommands) with its closing example, refusing a single-value option given twice."""
    from toolkit.cli.options import refuse_repeated_options

    command.epilog = command.epilog or example_epilog(path)
    refuse_repeated_options(command)
    for name, sub in getattr(command, "commands", {}).items():
        _with_examples(sub, f"{path} {name}")
    return command


class LazyGroup(click.Group):
    """A group whose subcommands come from ``COMMANDS`` and are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # click's own handling writes a blank line before its Abort
            from toolkit.cli.common import Interrupted

            raise Interrupted() from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, _, attr = COMMANDS[cmd_name][0].partition(":")
            self.add_command(_with_examples(getattr(import_module(module), attr), cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing reads the static short help, so ``bedside --help`` imports no command module.
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows: dict[str, tuple[str, str]] = {}
        for name in names:
            if name in self.commands or name not in COMMANDS:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                text = command.get_short_help_str(limit)
            else:
                text = click.utils.make_default_short_help(COMMANDS[name][1], limit)
            rows[name] = (name.ljust(max(len(n) for n in names)), text)  # one column width in every section
        grouped = [name for members in GROUPS.values() for name in members]
        sections = [*GROUPS.items(), ("Other", tuple(n for n in rows if n not in grouped))]
        for heading, members in sections:
            shown = [rows[name] for name in members if name in rows]
            if shown:
                with formatter.section(heading):
                    formatter.write_dl(shown)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=example_epilog(""))
@click.version_option(package_name="bedside")  # read through importlib.metadata: nothing else is imported
def cli() -> None:
    """bedside: collect, score and analyse BedsideBench evaluations.

    Not for clinical use: BedsideBench scores evaluate AI systems; they are not medical advice.
    """


def main(argv: list[str] | None = None) -> int:
    from toolkit.cli.common import run_safely

    return run_safely(cli, argv if argv is not None else sys.argv[1:])


def entry() -> int:
    """``main`` as the whole process (the ``bedside`` script and ``python -m toolkit``, through
    ``toolkit.console``): what concerns the process as a whole is done here, not in ``main``, which
    tests and notebooks call inside a process of their own."""
    # A stream the shell closed (``>&-``) is None in Python: what goes there is dropped, as the user asked,
    # instead of a command stopping with an internal error when it writes its table or CSV.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    code = main(sys.argv[1:])
    from toolkit import _process

    _process.no_collection_at_exit()
    return code
