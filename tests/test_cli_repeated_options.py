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
