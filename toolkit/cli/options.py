"""The options the commands share, each declared here once, and the typed records they give a command.

A decorator adds its options to a command; ``run_options`` and ``judge_options`` hand the command one
record instead of their separate values (``runs: RunChoice``, ``selection: JudgeSelection``). Resample
counts and seeds are checked as they are parsed, by the rules every settings record uses
(``toolkit.protocol.check_samples`` / ``check_seed``), so a command refuses them in the API's words before
it reads anything.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import click

from toolkit.cli.common import STORE_DEFAULT_TEXT, CommandError, RunChoice  # noqa: F401 (the record run_options gives)
from toolkit.cli.table import WIDE_KEY
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, check_samples, check_seed


def _gathered(into: str, names: tuple[str, ...], make: Callable[..., Any]) -> Callable[[Callable], Callable]:
    """Pass the values of the options ``names`` to the command as one record, the parameter ``into``."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)  # the options declared below this decorator stay the command's
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = make(**{name: kwargs.pop(name) for name in names})
            return func(*args, **kwargs)

        return command

    return decorate


RUN_HELP = ("Run id (repeatable), or a pattern of ids with * ? [...] (quote it: --run 'model-*'), matched "
            "against the store's run ids when no run has that exact id.")
RUNS_FILE_HELP = "A file of run ids (or patterns), one a line; blank lines and lines starting with # are skipped."


def run_options(func: Callable) -> Callable:
    """``--run`` / ``--runs-file`` / ``--all``: the command receives ``runs: RunChoice``."""
    func = _gathered("runs", ("run_ids", "all_runs", "runs_file"),
                     lambda run_ids, all_runs, runs_file: RunChoice(ids=tuple(run_ids), every=all_runs,
                                                                    file=runs_file))(func)
    func = click.option("--all", "all_runs", is_flag=True, help="Every run in the store.")(func)
    func = click.option("--runs-file", "runs_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                        help=RUNS_FILE_HELP)(func)
    return click.option("--run", "run_ids", multiple=True, help=RUN_HELP)(func)


def one_run_option(help: str) -> Callable[[Callable], Callable]:  # noqa: A002 - click's own name
    """``--run ID`` (``run_id``) for a command about one run; the help says what it does with it."""
    return click.option("--run", "run_id", required=True, help=help)


SCORING_JUDGE_HELP = "Score with this judge model (default: each run's judge)."
SCORING_PASS_HELP = "Judge pass(es) to use (default: all)."


def judge_options(judge_help: str = SCORING_JUDGE_HELP, pass_help: str = SCORING_PASS_HELP
                  ) -> Callable[[Callable], Callable]:
    """``--judge`` / ``--pass``: the command receives ``selection: JudgeSelection`` (the help says what the
    selection is for: scoring by default)."""

    def make(judge: str | None, passes: tuple[int, ...]) -> Any:
        from toolkit.selection import JudgeSelection  # the data stack, only when the command runs

        return JudgeSelection(judge=judge, passes=tuple(passes) or None)

    def decorate(func: Callable) -> Callable:
        func = _gathered("selection", ("judge", "passes"), make)(func)
        func = click.option("--pass", "passes", type=int, multiple=True, help=pass_help)(func)
        return click.option("--judge", default=None, help=judge_help)(func)

    return decorate


def _checked(check: Callable[[object], int]) -> Callable[[click.Context, click.Parameter, int], int]:
    def callback(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
        try:
            return check(value)
        except ValueError as error:  # the settings records' own words, as one line
            raise CommandError([str(error)]) from None

    return callback


def resample_options(samples_help: str | None = None, seed_help: str | None = None
                     ) -> Callable[[Callable], Callable]:
    """``--samples`` / ``--seed`` (the protocol's 10000 and 42 by default), checked as they are parsed; a
    help text given here names the default itself."""

    def decorate(func: Callable) -> Callable:
        func = click.option("--seed", type=int, default=BOOTSTRAP_SEED, show_default=seed_help is None,
                            callback=_checked(check_seed), help=seed_help or "Bootstrap seed.")(func)
        return click.option("--samples", type=int, default=BOOTSTRAP_SAMPLES, show_default=samples_help is None,
                            callback=_checked(check_samples), help=samples_help or "Bootstrap resamples.")(func)

    return decorate


PAIRED_MIN_SAMPLES = 100  # below this the 2.5% and 97.5% percentiles rest on a couple of resamples


def check_paired_samples(samples: int, command: str) -> None:
    """The resampled intervals these commands show (rank intervals, agreement and variance intervals) need a
    usable number of resamples: refuse fewer, with one line."""
    if samples < PAIRED_MIN_SAMPLES:
        raise CommandError([f"{command}: --samples must be >= {PAIRED_MIN_SAMPLES} for its resampled intervals "
                            f"(got {samples})"])


def allow_mixed_option(func: Callable) -> Callable:
    return click.option("--allow-mixed", is_flag=True,
                        help="Compare runs graded on different datasets or by different judges.")(func)


class _StoreOption(click.Option):
    """``--store``, whose help also shows where the default store is right now."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        from toolkit.store import default_store_path

        return record[0], f"{record[1]} [now: {default_store_path()}]"


def store_option(func: Callable) -> Callable:
    return click.option("--store", "store_dir", type=click.Path(file_okay=False), cls=_StoreOption,
                        help=f"Store directory or s3://bucket/prefix URL (default: {STORE_DEFAULT_TEXT}).")(func)


def dataset_option(func: Callable | None = None, *, required_help: str | None = None) -> Callable:
    """``--dataset``; with ``required_help`` it must be given (or set in $BEDSIDE_DATASET), as for ``audit``."""
    if required_help is not None:
        return click.option("--dataset", "dataset_path", required=True, envvar="BEDSIDE_DATASET",
                            type=click.Path(), help=required_help)
    assert func is not None
    return click.option("--dataset", "dataset_path", type=click.Path(exists=False),
                        help="Dataset checkout or case file (default: $BEDSIDE_DATASET, else the bundled "
                             "sample).")(func)


def json_option(help: str) -> Callable[[Callable], Callable]:  # noqa: A002 - click's own name
    """``--json`` (``as_json``): what the JSON holds differs between commands, so each says it."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def _set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[WIDE_KEY] = True
    return value


def wide_option(func: Callable) -> Callable:
    """``--wide``: tables show every column, however wide (read by ``emit``; no parameter to pass on)."""
    return click.option("--wide", is_flag=True, expose_value=False, callback=_set_wide,
                        help="Tables: every column, wider than the terminal if need be (default: the columns "
                             "that fit).")(func)


def format_option(func: Callable) -> Callable:
    """``--format table|csv|json`` (``fmt``) and ``--wide``."""
    func = wide_option(func)
    return click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                        show_default=True, help="Output format.")(func)


PRICES_HELP = ("Price table (TOML: USD per 1M input/output/reasoning tokens by model) [default: $BEDSIDE_PRICES, "
               "else only sim/ models are priced]; unpriced runs show tokens.")
prices_option = click.option("--prices", "prices_file", type=click.Path(dir_okay=False), default=None,
                             metavar="FILE", help=PRICES_HELP)


def refuse_repeated_options(command: click.Command) -> click.Command:
    """Refuse an option given twice unless it is repeatable (``multiple``): click keeps the last value of
    the others and drops the rest without a word (``judge --run A --run B`` judged B alone). Applied to every
    command as it is loaded (``toolkit.cli.LazyGroup``); help and version, answered at once, are left alone."""
    make_parser = command.make_parser

    def checked_parser(ctx: click.Context) -> Any:
        parser = make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            if not ctx.resilient_parsing:  # (shell completion parses partial lines)
                _refuse_repeats(ctx, order)
            return opts, rest, order

        parser.parse_args = parse_args
        return parser

    command.make_parser = checked_parser  # type: ignore[method-assign]
    return command


def _refuse_repeats(ctx: click.Context, order: list[click.Parameter]) -> None:
    seen: dict[str, int] = {}
    for param in order:
        if isinstance(param, click.Option) and not param.multiple and not param.is_eager:
            seen[param.opts[0]] = seen.get(param.opts[0], 0) + 1
    # given on a group too (`runs --store A rm X --store B`): one of the two would be dropped without a word
    parent = ctx.parent
    while parent is not None:
        for param in parent.command.params:
            if (isinstance(param, click.Option) and param.opts[0] in seen and param.name is not None
                    and parent.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE):
                seen[param.opts[0]] += 1
        parent = parent.parent
    for name, count in seen.items():
        if count > 1:
            raise click.UsageError(f"{name} given {count} times; give it once", ctx)


def dataset_argument(func: Callable) -> Callable:
    """``[PATH]`` or ``--dataset PATH`` (``dataset_path``) for a command whose one input is a dataset, as
    ``audit FILE`` takes its file: both forms work, and the same path given both ways is the one dataset."""

    def one(path: str | None, dataset_path: str | None) -> str | None:
        if path is not None and dataset_path is not None and path != dataset_path:
            raise click.UsageError("give the dataset once: as PATH or as --dataset", click.get_current_context())
        return path if path is not None else dataset_path

    func = _gathered("dataset_path", ("path", "dataset_path"), one)(func)
    func = dataset_option(func)
    return click.argument("path", required=False, type=click.Path(exists=False))(func)
