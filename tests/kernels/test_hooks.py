"""Every hook that model code marks with ``@overridable`` has a kernel that overrides it, and
every kernel's override names a hook that model code marks (no dead hooks either way)."""

from __future__ import annotations

import ast
from pathlib import Path

import attnas.kernels  # noqa: F401  (registers every kernel)
from attnas.ops import overrides

PACKAGE = Path(attnas.kernels.__file__).resolve().parents[1]


def _marked_hooks() -> set[str]:
    hooks = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "overridable"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                hooks.add(node.args[0].value)
    return hooks


def test_every_hook_has_an_override_and_every_override_a_hook():
    marked, registered = _marked_hooks(), set(overrides.registered())
    assert marked, "no @overridable hook found"
    assert not marked - registered, f"hooks no kernel overrides: {sorted(marked - registered)}"
    assert not registered - marked, f"overrides of hooks no code marks: {sorted(registered - marked)}"


def test_every_kernel_registers_an_override():
    assert set(overrides.registered().values()) == set(attnas.kernels.KERNELS)
