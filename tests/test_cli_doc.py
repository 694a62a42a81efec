"""docs/cli.md is what ``--help`` prints; ``bedside --help`` groups every command; each command's help ends
with one example that the command's own parser accepts."""

from __future__ import annotations

import shlex

import click

from tests.cli_doc import DOC, command_paths, help_text, render


def test_cli_doc_is_what_help_prints() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), "docs/cli.md is stale: run `python -m tests.cli_doc`"


def test_every_command_is_in_one_group() -> None:
    from toolkit.cli import COMMANDS, GROUPS

    grouped = [name for members in GROUPS.values() for name in members]
    assert sorted(grouped) == sorted(COMMANDS), "a command missing from toolkit.cli.GROUPS, or listed twice"
    top = help_text([])
    assert [line for line in top.splitlines() if line.endswith(":") and not line.startswith(" ")] == \
        ["Options:", *(f"{heading}:" for heading in GROUPS)]


def test_each_help_ends_with_one_example_its_parser_accepts() -> None:
    from toolkit.cli import cli

    for words in command_paths():
        lines = help_text(words).rstrip().splitlines()
        assert lines[-2].strip() == "Example:" and lines[-1].startswith("    bedside "), (words, lines[-3:])
        assert sum(line.strip() == "Example:" for line in lines) == 1, words
        first = shlex.split(lines[-1].strip().split(" && ")[0])[1:]
        ctx = click.Context(cli, info_name="bedside")
        command, args = cli, first
        while isinstance(command, click.Group) and args and args[0] in command.list_commands(ctx):
            command = command.get_command(ctx, args[0])
            args = args[1:]
        assert first[:len(words)] == words, ("a command's example runs that command (or one of its own)", words)
        command.make_context("bedside", list(args), resilient_parsing=False)  # raises on an unknown option
