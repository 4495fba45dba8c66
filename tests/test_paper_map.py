"""The map from each paper to its code (docs/developing.md, "Where each paper lives", and the
README's short table) names only paths that exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Where each paper lives"
PAPERS = ["AutoAttend", "Attention-mechanism search", "AutoLA", "Full-attention NAS", "Operation embeddings"]
ROLES = ["space", "strategy", "networks", "operations", "tasks", "recipes", "results"]


def _map_text() -> str:
    text = (REPO / "docs" / "developing.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/developing.md has no section {SECTION!r}"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _matches(path: str) -> list[Path]:
    return sorted(REPO.glob(path)) if "*" in path else [REPO / path] if (REPO / path).exists() else []


def test_the_map_names_every_paper_and_each_role():
    text = _map_text()
    blocks = re.split(r"\n\*\*", "\n" + text)[1:]
    assert [b.split("**", 1)[0] for b in blocks] == PAPERS
    for block in blocks:
        roles = re.findall(r"^- (\w+):", block, flags=re.M)
        assert roles == ROLES, f"{block.split('**', 1)[0]}: roles {roles}"


def test_every_path_in_the_map_exists():
    paths = re.findall(r"`((?:attnas|docs)/[^`\s]+)`", _map_text())
    assert len(paths) > 60
    missing = [p for p in paths if not _matches(p)]
    assert not missing, f"docs/developing.md names paths that do not exist: {missing}"


def test_every_path_in_the_readme_table_exists():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| ") and "`spaces/" in line]
    assert len(rows) == len(PAPERS)
    missing = []
    for row in rows:
        cells = row.split(" | ")
        for path in re.findall(r"`((?:spaces|strategies)/[^`]+)`", row):
            missing += [] if (REPO / "attnas" / path).is_file() else [path]
        for recipe in re.findall(r"`([a-z-]+-\*)`", cells[3]):
            missing += [] if _matches(f"attnas/recipes/{recipe}.yaml") else [recipe]
        for page in re.findall(r"\]\((docs/results/[^)]+)\)", row):
            missing += [] if (REPO / page).is_file() else [page]
    assert not missing, f"README.md's map names what does not exist: {missing}"
