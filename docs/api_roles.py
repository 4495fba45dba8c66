"""Griffe extension: turn the Sphinx roles of attnas's docstrings into checked cross-references.

The docstrings name other objects with Sphinx roles (``:class:`~attnas.core.errors.ConfigError```,
``:func:`load_config```). mkdocstrings renders Markdown, so this extension rewrites each role
before rendering:

- a dotted ``attnas.`` path becomes an autorefs link (``[`ConfigError`][attnas.core.errors.ConfigError]``
  for ``~attnas.core.errors.ConfigError``), which ``mkdocs build --strict`` reports when the target
  is not documented: a renamed or deleted object breaks the docs build;
- a bare or partly dotted name (``:func:`load_config```, ``:meth:`Space.build```) is looked up
  in the scope of the docstring's object (the class, then its module, then the module's
  imports) and linked the same way when found there, else shown as code;
- a name that goes through a private one (``_OneShot``), which the reference leaves out, is
  shown as code;
- any other role (``:math:``, names of other libraries such as ``torch.nn.Module``) is shown
  as code;
- a ``.. math::`` block becomes a fenced ``latex`` code block, so its formula is shown as
  written (Markdown would eat its backslashes).

Loaded by ``mkdocs.yml`` (``extensions: [docs/api_roles.py]``), so ``mkdocs build`` must run
from the repository root.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?P<role>[a-z]+):`(?P<target>[^`]+)`")
MATH = re.compile(r"^(\s*)\.\. math::\s*$")
LINKED_ROLES = {"class", "func", "meth", "attr", "data", "mod", "exc", "obj", "const"}


def _lookup(obj: griffe.Object, dotted: str) -> str | None:
    """The full path of ``dotted`` as seen from ``obj``'s scope, or ``None`` when not found."""
    head, _, rest = dotted.partition(".")
    scopes = [obj] if obj.is_class or obj.is_module else []
    scopes += [p for p in (obj.parent, obj.module) if p is not None and p not in scopes]
    for scope in scopes:
        try:
            member = scope.members.get(head)
        except Exception:  # an alias that cannot be resolved
            member = None
        if member is None:
            continue
        try:
            path = member.target_path if member.is_alias else member.path
        except Exception:
            return None
        if not path.startswith("attnas"):
            return None
        return f"{path}.{rest}" if rest else path
    return None


def _private(path: str) -> bool:
    """Whether ``path`` goes through a private name, which the reference does not show."""
    return any(part.startswith("_") and not part.startswith("__") for part in path.split(".")[1:])


def math_blocks(text: str) -> str:
    """``text`` with each ``.. math::`` directive and its indented body as a fenced code block."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        directive = MATH.match(lines[i])
        if not directive:
            out.append(lines[i])
            i += 1
            continue
        indent = directive.group(1)
        body, i = [], i + 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        formula = textwrap.dedent("\n".join(body)).strip("\n").splitlines()
        if out and out[-1].strip():
            out.append("")
        out += [f"{indent}```latex", *(indent + line for line in formula), f"{indent}```", ""]
    return "\n".join(out)


def rewrite(text: str, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role replaced by a Markdown autorefs link or inline code."""

    def replace(match: re.Match) -> str:
        role, target = match.group("role"), match.group("target").strip()
        if role not in LINKED_ROLES:
            return f"`{target}`"
        short = target.startswith("~")
        path = target.lstrip("~!").removesuffix("()")
        label = path.rsplit(".", 1)[-1] if short else path
        full = path if path.startswith("attnas.") or path == "attnas" else _lookup(obj, path)
        if full is None or _private(full):
            return f"`{label}`"
        return f"[`{label}`][{full}]"

    return ROLE.sub(replace, math_blocks(text))


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s own docstring (aliases share their target's docstring)."""
        if obj.is_alias or obj.docstring is None:
            return
        obj.docstring.value = rewrite(obj.docstring.value, obj)
