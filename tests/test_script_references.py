"""Every script the documentation names exists where it says, and every ``python -m`` command
it prints names a module of the repository (the scripts of ``benchmarks/`` and
``docs/results/<page>/`` run as modules from the repository root)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT_PATH = re.compile(r"(?<![\w/.])((?:benchmarks|docs/results/[a-z_]+)/[\w/]+\.(?:py|sh))")
#: A module named in full (``NAME``, ``<name>`` placeholders are not).
MODULE = re.compile(r"python3? -m ((?:benchmarks|docs)(?:\.[a-z_0-9]+)+)(?![\w.])")


def _texts() -> dict[str, str]:
    files = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "docs").rglob("*.py"),
             *(REPO / "docs").rglob("*.sh"), *(REPO / "benchmarks").rglob("*.py"), *(REPO / "attnas").rglob("*.py"),
             *(REPO / "attnas" / "recipes").glob("*.yaml")]
    return {str(f.relative_to(REPO)): f.read_text(encoding="utf-8") for f in files}


def test_every_script_path_named_exists():
    texts = _texts()
    named = {(f, p) for f, text in texts.items() for p in SCRIPT_PATH.findall(text)}
    assert len(named) > 50
    missing = sorted(f"{f}: {p}" for f, p in named if not (REPO / p).is_file())
    assert not missing, "\n".join(missing)


def test_every_module_command_names_a_module():
    texts = _texts()
    named = {(f, m) for f, text in texts.items() for m in MODULE.findall(text)}
    assert len(named) > 100
    missing = sorted(f"{f}: python -m {m}" for f, m in named
                     if not (REPO / (m.replace(".", "/") + ".py")).is_file())
    assert not missing, "\n".join(missing)


def test_scripts_live_in_the_agreed_places():
    """``benchmarks/`` holds only the shared helper and its two folders; every folder of
    ``docs/results/`` is named after a results page beside it."""
    loose = sorted(p.name for p in (REPO / "benchmarks").iterdir()
                   if p.name not in {"__init__.py", "_common.py", "speed", "checks", "__pycache__"})
    assert not loose, f"benchmarks/ holds {loose}: speed benchmarks go to benchmarks/speed/, studies beside their page"
    results = REPO / "docs" / "results"
    orphans = sorted(d.name for d in results.iterdir()
                     if d.is_dir() and d.name not in {"summaries", "__pycache__"} and not (results / f"{d.name}.md").is_file())
    assert not orphans, f"docs/results/ folders without a page of the same name: {orphans}"
    assert not sorted(results.glob("*.py")) and not sorted(results.glob("*.sh")), "scripts go to docs/results/<page>/"
