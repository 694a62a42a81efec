"""An option given twice: a repeatable one (``multiple``) uses every value, any other is refused with one line
(click's own default keeps the last value and drops the others without a word)."""

from __future__ import annotations

import click
import pytest

from tests.cli_doc import command_paths
from tests.collect_support import bedside


def _command(words: list[str]) -> click.Command:
    from toolkit.cli import cli

    command: click.Command = cli
    for word in words:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), word)
    return command


def _single_options() -> list[tuple[list[str], click.Option]]:
    """Every command's options that take one value (flags included); help and version are answered at once."""
    return [(words, param) for words in command_paths() for param in _command(words).params
            if isinstance(param, click.Option) and not param.multiple and not param.is_eager]


def test_every_command_is_walked() -> None:
    names = {" ".join(words) for words, _ in _single_options()}
    assert {"judge", "export", "runs", "runs rm", "dataset validate", "sim serve", "plan", "compare",
            "labels import", "review"} <= names


@pytest.mark.parametrize("words, param", _single_options(),
                         ids=lambda v: v.name if isinstance(v, click.Option) else " ".join(v) or "bedside")
def test_a_repeated_single_value_option_is_refused(words, param) -> None:
    """Parsed only (never run): the refusal comes before any value is read or any other check."""
    given = [param.opts[0]] if param.is_flag else [param.opts[0], "1"]
    with pytest.raises(click.UsageError) as refused:
        _command(words).make_context(" ".join(["bedside", *words]), [*given, *given])
    assert refused.value.format_message() == f"{param.opts[0]} given 2 times; give it once"


def test_the_refusal_is_one_line_and_touches_nothing(tmp_path) -> None:
    code, out, err = bedside("export", "--run", "a", "--out", str(tmp_path / "a.jsonl"), "--run", "b",
                             "--store", str(tmp_path / "store"))
    assert (code, out) == (2, "")
    assert err == "bedside: error: --run given 2 times; give it once (see `bedside export --help`)\n"
    assert not list(tmp_path.iterdir())


def test_the_judge_takes_several_runs() -> None:
    multiple = {(" ".join(words), p.opts[0]) for words in command_paths() for p in _command(words).params
                if isinstance(p, click.Option) and p.multiple}
    assert ("judge", "--run") in multiple


def _shared_with_group() -> list[tuple[list[str], str]]:
    """(a subcommand, an option its group takes too): `labels --store A list --store B` named two stores."""
    pairs = []
    for words in command_paths():
        if len(words) < 2:
            continue
        group = {p.opts[0] for p in _command(words[:-1]).params if isinstance(p, click.Option) and not p.is_eager}
        pairs += [(words, p.opts[0]) for p in _command(words).params
                  if isinstance(p, click.Option) and not p.is_eager and p.opts[0] in group]
    return pairs


def test_subcommands_share_options_with_their_groups() -> None:
    assert (["labels", "list"], "--store") in _shared_with_group()
    assert (["runs", "rm"], "--store") in _shared_with_group()


@pytest.mark.parametrize("words, option", _shared_with_group(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_an_option_given_on_a_group_and_its_subcommand_is_refused(words, option, tmp_path) -> None:
    """`runs --store A rm RUN --store B` removed RUN from B: one of the two values was dropped without a word."""
    param = next(p for p in _command(words).params if isinstance(p, click.Option) and p.opts[0] == option)
    plain = param.type.choices[0] if isinstance(param.type, click.Choice) else "1"
    value = [] if param.is_flag else [str(tmp_path / "b") if option == "--store" else plain]
    first = [] if param.is_flag else [str(tmp_path / "a") if option == "--store" else plain]
    code, out, err = bedside(*words[:-1], option, *first, words[-1], option, *value)
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and f"{option} given 2 times" in err, err
