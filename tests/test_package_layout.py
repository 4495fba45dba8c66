"""``attnas/`` is grouped into packages named after what they hold (docs/developing.md, "Where
the rest of the core lives"): at the top only the public API, the command line and the
registry, and no module longer than 500 lines."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "attnas"
#: The modules that stay at the top of the package.
TOP_LEVEL = {"__init__", "__main__", "_version", "_component_index", "registry", "pipeline", "cli"}
MAX_LINES = 500


def test_only_the_api_the_cli_and_the_registry_are_at_the_top():
    extra = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in TOP_LEVEL)
    assert not extra, f"top-level modules outside a package (move them into one of attnas/*/): {extra}"


def test_no_module_is_longer_than_500_lines():
    long = sorted(f"{p.relative_to(REPO)}: {n}" for p in PACKAGE.rglob("*.py")
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines (split them by purpose): {long}"


def test_the_layout_table_names_every_package():
    text = (REPO / "docs" / "developing.md").read_text(encoding="utf-8")
    section = text.split("## Where the rest of the core lives", 1)[1].split("\n## ", 1)[0]
    named = {p.rstrip("/") for p in re.findall(r"`attnas/(\w+)/`", section)}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert named == packages, f"packages missing from the table: {sorted(packages - named)}; " \
                              f"named but absent: {sorted(named - packages)}"
