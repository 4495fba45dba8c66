"""The package's modules import each other without cycles (function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "attnas"


def _module_names() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        names[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return names


def _imported(node: ast.AST, base: str, modules: dict) -> list[str]:
    """The attnas modules one import statement names (``from pkg import module`` counts the module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        package = base
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        module = package + ("." + node.module if node.module else "")
    else:
        module = node.module or ""
    submodules = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
    return submodules if len(submodules) == len(node.names) else submodules + [module]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(sub) for sub in ast.walk(node))
    return skipped


def import_graph() -> nx.DiGraph:
    """Module -> module edges of every import in the package, at any level of the code."""
    modules = _module_names()
    graph = nx.DiGraph()
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        base = name if is_package else name.rpartition(".")[0]
        graph.add_node(name)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            for target in _imported(node, base, modules):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("attnas"):
                    graph.add_edge(name, target)
    return graph


def test_the_import_graph_is_built_from_the_package():
    graph = import_graph()
    assert graph.has_edge("attnas.cli", "attnas.pipeline")
    assert graph.number_of_nodes() > 50


def test_no_import_cycles():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"
