"""The documentation builds: ``mkdocs build --strict`` with the API reference from the docstrings.

Strict mode turns every warning into a failure: a broken link between pages, a missing
anchor, a page left out of the navigation, a docstring griffe cannot parse, and a
cross-reference of a docstring (``:class:`~attnas.core.errors.ConfigError```, rewritten to a link
by ``docs/api_roles.py``) whose target is not documented.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def test_mkdocs_build_is_strict_and_clean(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml",
                           "--site-dir", str(site)], cwd=REPO, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert "No module named mkdocs" not in log, 'the docs need their packages: pip install -e ".[docs]"'
    assert proc.returncode == 0, log[-6000:]
    assert "WARNING" not in log, log[-6000:]
    api = (site / "api" / "index.html").read_text()
    assert 'id="attnas.pipeline.search"' in api  # the public search function has its entry
    runs = (site / "api" / "runs" / "index.html").read_text()
    # a Sphinx role of a docstring became a link to the documented object
    assert re.search(r'href="[^"]*#attnas\.core\.errors\.ConfigError"', runs)
    ops = (site / "api" / "ops" / "index.html").read_text()
    assert ".. math::" not in ops and 'class="language-latex"' in ops  # formulas kept as written
    for page in ("methods/autoattend", "methods/dartformer", "methods/autola", "methods/fullattn",
                 "methods/opemb", "own_data", "plugins", "results", "developing"):
        assert (site / page / "index.html").is_file(), page


def _documented_identifiers() -> set[str]:
    found = set()
    for page in (DOCS / "api").glob("*.md"):
        found.update(re.findall(r"^::: (attnas[\w.]*)", page.read_text(), flags=re.M))
    return found


def test_every_module_is_in_the_api_reference():
    """A new module needs no edit of the reference: a package page shows its submodules;
    a new top-level module must be added to one page (docs/api/runs.md)."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    python = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    assert python["handlers"]["python"]["options"]["show_submodules"] is True
    documented = _documented_identifiers()
    modules = [".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
               for p in (REPO / "attnas").rglob("*.py")]
    private = re.compile(r"\._")
    missing = [m for m in modules if not private.search(m) and m not in ("attnas", "attnas.__main__")
               and not any(m == d or m.startswith(d + ".") for d in documented - {"attnas"})]
    assert not missing, f"modules in no page of docs/api/ (add a '::: module' line to docs/api/runs.md): {missing}"
