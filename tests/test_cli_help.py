"""Every command's ``--help`` shows the bracketed text of its help strings (rich markup must not eat it)."""

from __future__ import annotations

import re

import click
import pytest
import typer
from typer.testing import CliRunner

from attnas.cli import app

runner = CliRunner()
GROUP = typer.main.get_command(app)
#: Brackets as written in a help string: ``\[`` is rich's escape of a literal bracket.
BRACKETED = re.compile(r"\\?\[[^\]]*\]")


def _help_strings(command: click.Command) -> list[str]:
    return [command.help or "", *[getattr(p, "help", None) or "" for p in command.params]]


def _bracketed(command: click.Command) -> list[str]:
    return [m.group(0).lstrip("\\") for text in _help_strings(command) for m in BRACKETED.finditer(text)]


def _flat(text: str) -> str:
    """The help output as one line: rich's box characters and line wrapping removed."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


COMMANDS = [None, *sorted(GROUP.commands)]


def test_the_help_strings_have_brackets_to_check():
    assert "[v1, v2]" in _bracketed(GROUP.commands["sweep"])
    assert sum(len(_bracketed(GROUP.commands[name])) for name in GROUP.commands) >= 5


@pytest.mark.parametrize("name", COMMANDS)
def test_help_renders_every_bracketed_text(name):
    command = GROUP if name is None else GROUP.commands[name]
    args = ["--help"] if name is None else [name, "--help"]
    r = runner.invoke(app, args, env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert r.exit_code == 0, r.output
    shown = _flat(r.output)
    for text in _bracketed(command):
        assert " ".join(text.split()) in shown, f"{text!r} missing from `attnas {name or ''} --help`:\n{r.output}"
