"""The package's layers import downwards only (function-level imports included).

Operations (``attnas/ops``) are the bottom layer: the readable eager implementation of each
operation, which knows nothing of what uses it or replaces it. Networks (``attnas/models``) are
built from operations; spaces (``attnas/spaces``) describe architectures and build networks;
strategies (``attnas/strategies``) search spaces. The optional compiled kernels
(``attnas/kernels``) replace operations through ``attnas.ops.overrides`` and are never imported
by model code (docs/developing.md, "Compiled CPU kernels"). The edges are those of
:func:`test_import_graph.import_graph`; imports under ``if TYPE_CHECKING:`` do not count.

Networks never reach spaces by any route: no module of ``attnas/models`` imports the
registry (which imports modules of ``attnas/spaces`` at run time, where no import names them)
or names a module of ``attnas/spaces`` in a string; the AutoAttend networks are built from a
plain :class:`~attnas.models.autoattend_network.AutoAttendNetworkConfig` that the space makes
(:mod:`attnas.spaces.autoattend_networks`), and building and running one imports neither.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
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
    """The graph the rules read includes imports inside functions (``AutoAttendConfig.__post_init__`` has one)."""
    assert graph.has_edge("attnas.spaces.autoattend_config", "attnas.ops.autoattend.common")


def test_networks_never_import_the_registry(graph):
    """The registry imports spaces at run time (a lookup, ``discover``): networks get what they
    build from their config, never from a lookup."""
    wrong = sorted(f"{a} imports {b}" for a in graph if _in(a, "models") for b in graph.successors(a)
                   if b in ("attnas.registry", "attnas._component_index"))
    assert not wrong, "\n".join(wrong)


def _strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


def test_networks_never_name_a_space_module():
    """No string in ``attnas/models`` (docstrings aside) names a module of ``attnas/spaces``:
    the route of an ``import_module`` by name, which the import graph does not see."""
    wrong = [f"{path.relative_to(REPO)}: {s!r}" for path in sorted((PACKAGE / "models").rglob("*.py"))
             for s in _strings(path) if "attnas.spaces" in s or "attnas/spaces" in s]
    assert not wrong, "\n".join(wrong)


def test_an_autoattend_network_is_built_and_run_without_spaces_or_the_registry():
    """Built from a config with a domain's parts, the networks import no space and no registry."""
    code = textwrap.dedent("""
        import random, sys
        import torch
        from torch import nn
        from attnas.core.arch import Arch
        from attnas.models.autoattend_network import AutoAttendModel, AutoAttendNetworkConfig, AutoAttendSupernet

        class Attention(nn.Module):
            def forward(self, q, k, v, ctx):
                return q * k + v

        class Op(nn.Linear):
            def forward(self, x, ctx):
                return super().forward(x)

        class Parts:
            def stem(self):
                return nn.Sequential()  # replaced below: a stem returns (h0, context)
            def head(self):
                return Head()
            def attention(self):
                return Attention()
            def op(self, name, in_dim, out_dim, last):
                return Op(in_dim, out_dim)

        class Stem(nn.Linear):
            def forward(self, x):
                return super().forward(x), None

        class Head(nn.Linear):
            def __init__(self):
                super().__init__(8, 3)
            def forward(self, h, ctx):
                return super().forward(h)

        Parts.stem = lambda self: Stem(5, 8)
        config = AutoAttendNetworkConfig(layers=2, hidden=8, in_dim=5, num_classes=3, raw_input=False,
                                         scores_output=False, context="fc", layer_types=("add", "attn"),
                                         ops=("zero", "lin"), input_dropout=0.0, add_dropout=0.0,
                                         per_layer_attention=False, parts=Parts())
        arch = Arch("autoattend", {"layers": [
            {"type": "add", "inputs": [{"source": 0, "op": "lin"}, {"source": 0, "op": "zero"}]},
            {"type": "attn", "inputs": [{"source": 1, "op": "lin"}, {"source": 0, "op": "lin"},
                                        {"source": 0, "op": "lin"}]}]})
        supernet, model = AutoAttendSupernet(config).eval(), AutoAttendModel(config, arch).eval()
        model.load_from_supernet(supernet)
        x = torch.randn(4, 5)
        assert torch.allclose(supernet(x, arch), model(x)), "supernet != standalone"
        loaded = sorted(m for m in sys.modules if m.startswith(("attnas.spaces", "attnas.registry", "attnas.strategies")))
        assert not loaded, loaded
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


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
