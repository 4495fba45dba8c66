"""docs/results.md is what docs/build_results.py assembles from the summaries, and stays short."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _builder():
    spec = importlib.util.spec_from_file_location("build_results", DOCS / "build_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_is_the_assembled_summaries_within_the_line_limit():
    builder = _builder()
    page = builder.build()
    assert (DOCS / "results.md").read_text() == page, "run: python docs/build_results.py"
    assert page.count("\n") <= builder.MAX_LINES


def test_every_link_of_the_results_page_points_to_a_file():
    page = (DOCS / "results.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)\)", page)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (DOCS / t).exists()]
    assert not missing, missing


def test_the_comparison_section_is_in_place():
    assert "## Is the search better than hand-designed attention? (attnas compare)" in (DOCS / "results.md").read_text()


#: A path that names one machine's folders: an absolute path under a system or home folder.
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|home|tmp|root|Users|mnt|scratch|opt|srv|var|usr/local)/[\w./-]*")


def test_pages_name_no_machine_s_folders():
    pages = [DOCS / "results.md", DOCS / "developing.md", *sorted((DOCS / "results").rglob("*.md")),
             DOCS.parent / "README.md"]
    found = [f"{p.relative_to(DOCS.parent)}:{n}: {m.group(0)}" for p in pages
             for n, line in enumerate(p.read_text().splitlines(), 1) for m in MACHINE_PATH.finditer(line)]
    assert not found, "commands and text must use paths relative to a fresh clone:\n" + "\n".join(found)


def test_the_pattern_catches_machine_paths_and_spares_relative_ones():
    assert MACHINE_PATH.search("attnas search x --out /tmp/i4/fm/run")
    assert MACHINE_PATH.search("ATTNAS_DATA=/work/shared/data attnas ...")
    assert not MACHINE_PATH.search("ATTNAS_DATA=../shared/data attnas search x --out runs/fm")
    assert not MACHINE_PATH.search("see docs/results/autola.md and https://example.org/tmp/x")


#: How a page must not refer to a paper or to the work behind it: the project's internal
#: numbering of papers ("paper 003") and issue numbers mean nothing to a reader.
INTERNAL_REFERENCE = re.compile(r"\bpaper 00\d\b|\bissues? #?\d+\b", re.IGNORECASE)


def test_pages_cite_papers_by_author_and_name_no_issue_numbers():
    pages = [DOCS / "results.md", *sorted((DOCS / "results").rglob("*.md")), *sorted(DOCS.glob("*.md")),
             DOCS.parent / "README.md"]
    found = [f"{p.relative_to(DOCS.parent)}:{n}: {m.group(0)}" for p in pages
             for n, line in enumerate(p.read_text().splitlines(), 1) for m in INTERNAL_REFERENCE.finditer(line)]
    assert not found, "\n".join(found)
    assert INTERNAL_REFERENCE.search("as paper 003 says") and INTERNAL_REFERENCE.search("see issue 23")
    assert not INTERNAL_REFERENCE.search("Zhou et al., Table VII; 3 issues remain open")
