"""The commands the documentation pages show are real: their recipes and ``--set`` keys load.

Every ``attnas search|show|compare|sweep`` line of a ``bash`` block in the user pages is
parsed as the shell would (``shlex``), and its recipe with its overrides goes through
:func:`attnas.config.load_config`, which rejects an unknown recipe, a misspelt key or a bad
value. ``attnas export --format F`` must name a real format. Commands of the plugin example
(a recipe under ``examples/``) need the plugin and are checked by
``tests/examples/test_plugin_example.py``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from attnas.config import load_config
from attnas.export.export_folders import FORMATS

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs" / "methods").glob("*.md")) + [REPO / "docs" / p for p in
                                                            ("own_data.md", "plugins.md", "index.md")]
GLOBAL_OPTIONS = {"--threads": 1, "--debug": 0}


def bash_lines(page: Path) -> list[str]:
    """The command lines of the page's ``bash`` blocks (comments cut)."""
    lines, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```bash" if not inside else False
            continue
        if inside and line.strip():
            lines.append(line.split(" #", 1)[0].strip())
    return lines


def attnas_commands() -> list[tuple[str, list[str]]]:
    out = []
    for page in PAGES:
        for line in bash_lines(page):
            words = shlex.split(line)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # ATTNAS_DATA=... prefix
                words.pop(0)
            if not words or words[0] != "attnas":
                continue
            words = words[1:]
            while words and words[0] in GLOBAL_OPTIONS:
                words = words[1 + GLOBAL_OPTIONS[words[0]]:]
            out.append((f"{page.name}: {line}", words))
    return out


COMMANDS = attnas_commands()


def test_the_pages_show_commands():
    assert len(COMMANDS) > 30 and len(RECIPE_COMMANDS) > 20
    assert {w[0] for _, w in COMMANDS} >= {"search", "show", "report", "export"}


RECIPE_COMMANDS = [(where, words) for where, words in COMMANDS
                   if words[0] in ("search", "show", "compare", "sweep") and not words[1].startswith("examples/")]


@pytest.mark.parametrize("where,words", RECIPE_COMMANDS, ids=lambda v: v if isinstance(v, str) else None)
def test_recipe_commands_load(where, words):
    recipe = words[1]
    overrides = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    load_config(recipe, overrides)


def test_export_commands_name_real_formats():
    exports = [(where, words) for where, words in COMMANDS if words[0] == "export"]
    assert exports
    for where, words in exports:
        assert words[words.index("--format") + 1] in FORMATS, where
