"""The package's layers import downwards only (function-level imports included).

Operations (``attnas/ops``) are the bottom layer: the readable eager implementation of each
operation, which knows nothing of what uses it or replaces it. Networks (``attnas/models``) are
built from operations; spaces (``attnas/spaces``) describe architectures and build networks;
strategies (``attnas/strategies``) search spaces. The optional compiled kernels
(``attnas/kernels``) replace operations through ``attnas.ops.overrides`` and are never imported
by model code (docs/developing.md, "Compiled CPU kernels"). The edges are those of
:func:`test_import_graph.import_graph`; imports under ``if TYPE_CHECKING:`` do not count.

Not checked here (no import names it): ``attnas.models.autoattend_network.check_kind`` calls
``attnas.registry.discover()``, which imports every module of ``attnas/spaces`` at run time so
that the AutoAttend domain adapters (``attnas/spaces/autoattend_graph.py``,
``attnas/spaces/autoattend_text.py``, registered with ``register_adapter``) are found, and the
adapters read the space object's options: networks still reach spaces through the registry.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_import_graph import PACKAGE, import_graph

#: Layer -> the packages it must never import. A layer is ``attnas.<name>`` and its submodules.
FORBIDDEN = {
    "ops": ["kernels", "models", "spaces", "strategies", "tasks", "data", "graphvae"],
    "models": ["kernels", "spaces", "strategies"],
    "spaces": ["kernels", "strategies"],
    "graphvae": ["kernels", "spaces", "strategies"],
    "kernels": ["models", "spaces", "strategies"],
}
REPO = PACKAGE.parent


def _in(module: str, package: str) -> bool:
    return module == f"attnas.{package}" or module.startswith(f"attnas.{package}.")


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_layer_named_is_a_package_of_attnas():
    for package in {*FORBIDDEN, *(p for targets in FORBIDDEN.values() for p in targets)}:
        assert (PACKAGE / package / "__init__.py").is_file(), f"attnas/{package}/ is not a package"


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_never_imports_the_packages_above_it(graph, layer):
    sources = [m for m in graph if _in(m, layer)]
    assert sources, f"no module of attnas.{layer} in the import graph"
    wrong = sorted(f"{a} imports {b}" for a in sources for b in graph.successors(a)
                   if any(_in(b, p) for p in FORBIDDEN[layer]))
    assert not wrong, f"attnas.{layer} must not import {', '.join(FORBIDDEN[layer])}:\n" + "\n".join(wrong)


def test_the_rule_sees_a_function_level_import(graph):
    """The graph the rules read includes imports inside functions (as ``check_kind`` has one)."""
    assert graph.has_edge("attnas.models.autoattend_network", "attnas.registry") or any(
        b.startswith("attnas.registry") for b in graph.successors("attnas.models.autoattend_network"))


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _scripts() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *(REPO / "benchmarks").rglob("*.py"), *(REPO / "docs").rglob("*.py")])


def test_nothing_outside_tests_imports_from_tests_or_edits_sys_path():
    """The package and the scripts of benchmarks/ and docs/ import by package name only: no
    module of ``tests/`` (``conftest``, helpers), and no ``sys.path`` edits (scripts run as
    ``python -m benchmarks.speed.NAME`` or ``python -m docs.results.PAGE.NAME`` from the root)."""
    test_helpers = {p.stem for p in (REPO / "tests").rglob("*.py")} | {"tests"}
    wrong = []
    for path in _scripts():
        names = _top_level_imports(path) & test_helpers
        if names:
            wrong.append(f"{path.relative_to(REPO)} imports {sorted(names)}")
        if "sys.path.insert" in path.read_text(encoding="utf-8") or "sys.path.append" in path.read_text(
                encoding="utf-8"):
            wrong.append(f"{path.relative_to(REPO)} edits sys.path")
    assert len(_scripts()) > 100
    assert not wrong, "\n".join(wrong)


def test_the_package_never_imports_the_scripts():
    wrong = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if _top_level_imports(p) & {"benchmarks", "docs"}]
    assert not wrong, f"attnas imports benchmarks/ or docs/: {wrong}"
