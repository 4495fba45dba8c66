"""One registry for spaces, strategies, tasks, datasets and operations.

Components register themselves with a decorator where they are defined::

    @register_space("autoattend")
    class AutoAttendSpace(Space): ...

and are looked up by name with :func:`get` or built with :func:`create`. An unknown
name raises :class:`~attnas.core.errors.ConfigError` listing the valid choices.

Looking a name up imports only the module that registers it: the index of the built-in
components (``attnas._component_index``, name -> module, with each entry's group and
metadata) says which, so loading a recipe imports its task, space and strategy and
nothing else (no torch_geometric for an image recipe). :func:`names` answers from the
index without importing any component. :func:`entries` imports the modules of the kind it
lists; :func:`discover` imports every module of the component packages (``attnas.spaces``,
``attnas.strategies``, ``attnas.tasks``, ``attnas.data``, ``attnas.ops``), so that
``attnas list`` shows everything. Modules advertised by installed packages under the
``attnas.plugins`` entry-point group are loaded when a name is not in the index, and by
:func:`names`, :func:`entries` and :func:`discover`.

A component whose module needs an optional extra that is not installed (torch_geometric:
``attnas[graph]``; gpytorch and BoTorch: ``attnas[bo]``) raises a one-line
:class:`~attnas.core.errors.ConfigError` naming the extra when it is looked up, and is left out
of :func:`entries`.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnas._component_index import COMPONENTS
from attnas.core.errors import ConfigError, unknown_name
from attnas.runtime.extras import missing_error, missing_extra

KINDS = ("space", "strategy", "task", "dataset", "op")
_PACKAGES = ("attnas.ops", "attnas.data", "attnas.tasks", "attnas.spaces", "attnas.strategies")


@dataclass
class Entry:
    """A registered component.

    Attributes:
        kind: One of :data:`KINDS`.
        name: The name users write in recipes and on the command line.
        obj: The class or factory.
        group: A sub-division of the kind: the pool of an operation (part of its key), or
            a family for other kinds (metadata only, e.g. ``graph`` datasets).
        help: One line for ``attnas list``.
        extra: Free-form metadata (e.g. a dataset's ``modality``).
        module: The module whose import registered it.
    """

    kind: str
    name: str
    obj: Any
    group: str = ""
    help: str = ""
    extra: dict = field(default_factory=dict)
    module: str = ""


_ENTRIES: dict[tuple[str, str], Entry] = {}
_discovered = False
_plugins_loaded = False


def _first_doc_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _key(kind: str, name: str, group: str | None) -> tuple[str, str]:
    """Registry key: operations are keyed per pool (group); other kinds by name alone."""
    return (kind, f"{group}/{name}" if kind == "op" and group else name)


#: (kind, key) -> (name, group, module, extra) of each built-in component, from the index.
_INDEX: dict[tuple[str, str], tuple[str, str, str, dict]] = {
    _key(kind, name, group): (name, group, module, extra) for kind, name, group, module, extra in COMPONENTS
}


def _identity(obj: Any) -> tuple[str, str] | None:
    """Where ``obj`` is defined (module, qualified name): a module imported twice registers the same one."""
    qualname = getattr(obj, "__qualname__", None)
    return None if qualname is None else (getattr(obj, "__module__", ""), qualname)


def _registering_module() -> str:
    """The module whose top-level code is running the registration (the one being imported)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def register(kind: str, name: str, *, group: str = "", help: str = "", **extra: Any) -> Callable:
    """Register ``obj`` as a ``kind`` called ``name`` (decorator).

    Args:
        kind: One of :data:`KINDS`.
        name: Registered name; must be unique within the kind (and group, for ops).
        group: Optional sub-division, e.g. the operation pool an op belongs to.
        help: One-line description; defaults to the first docstring line.
        **extra: Free-form metadata kept on the entry.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; valid: {KINDS}")

    def decorator(obj: Any) -> Any:
        key = _key(kind, name, group)
        old = _ENTRIES.get(key)
        if old is not None and old.obj is not obj and _identity(old.obj) != _identity(obj):  # a re-import is fine
            raise ValueError(f"{kind} {key[1]!r} is registered twice ({old.obj!r} and {obj!r})")
        _ENTRIES[key] = Entry(kind, name, obj, group, help or _first_doc_line(obj), dict(extra),
                              _registering_module())
        return obj

    return decorator


def register_space(name: str, **kw: Any) -> Callable:
    """Register a search space class."""
    return register("space", name, **kw)


def register_strategy(name: str, **kw: Any) -> Callable:
    """Register a search strategy class."""
    return register("strategy", name, **kw)


def register_task(name: str, **kw: Any) -> Callable:
    """Register a task class."""
    return register("task", name, **kw)


def register_dataset(name: str, **kw: Any) -> Callable:
    """Register a dataset loader."""
    return register("dataset", name, **kw)


def register_op(group: str, name: str, **kw: Any) -> Callable:
    """Register a primitive operation factory in the pool ``group``."""
    return register("op", name, group=group, **kw)


def load_module(module: str, what: str) -> None:
    """Import a component module.

    Raises:
        ConfigError: ``<what> needs <package>, which is not installed: pip install "attnas[<extra>]"``
            when the module needs an optional package that is missing (``attnas.runtime.extras``).
    """
    try:
        importlib.import_module(module)
    except ImportError as exc:
        package = missing_extra(exc)
        if package is None:
            raise
        raise missing_error(package, what) from None


def _load_plugins() -> None:
    """Load the modules advertised under the ``attnas.plugins`` entry-point group (once)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group="attnas.plugins"):
            ep.load()
    except Exception as exc:  # a broken third-party plugin must not hide our own components
        import warnings

        warnings.warn(f"an attnas plugin failed to load: {exc}", stacklevel=3)


def discover() -> None:
    """Import every component module once so their decorators run (and load the plugins).

    Modules that need an optional extra that is not installed are skipped.
    """
    global _discovered
    if _discovered:
        return
    _discovered = True
    for pkg_name in _PACKAGES:
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
            if info.name.rsplit(".", 1)[-1].startswith("_"):
                continue
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                if missing_extra(exc) is None:
                    raise
    _load_plugins()


def _matches(kind: str, group: str | None, entry_group: str, entry_extra: dict, where: dict) -> bool:
    return (group is None or entry_group == group) and all(entry_extra.get(k) == v for k, v in where.items())


def entries(kind: str, group: str | None = None, **where: Any) -> list[Entry]:
    """Entries of ``kind`` (optionally of one ``group``, and with metadata equal to ``where``), sorted by name.

    Imports the modules that register them; an entry whose module needs a missing extra is left out.
    """
    _load_plugins()
    for (k, key), (_, entry_group, module, extra) in _INDEX.items():
        if k == kind and (k, key) not in _ENTRIES and _matches(kind, group, entry_group, extra, where):
            try:
                importlib.import_module(module)
            except ImportError as exc:
                if missing_extra(exc) is None:
                    raise
    out = [e for (k, _), e in _ENTRIES.items() if k == kind and _matches(kind, group, e.group, e.extra, where)]
    return sorted(out, key=lambda e: (e.group, e.name))


def names(kind: str, group: str | None = None, **where: Any) -> list[str]:
    """Registered names of ``kind`` (optionally of one ``group``, and with metadata equal to
    ``where``, e.g. ``modality="image"``), sorted; imports no built-in component."""
    _load_plugins()
    found = {(e.group, e.name) for (k, _), e in _ENTRIES.items() if k == kind and _matches(kind, group, e.group, e.extra, where)}
    found |= {(entry_group, name) for (k, _), (name, entry_group, _, extra) in _INDEX.items()
              if k == kind and _matches(kind, group, entry_group, extra, where)}
    return [name for _, name in sorted(found)]


def is_registered(kind: str, name: str, group: str | None = None, **where: Any) -> bool:
    """Whether ``name`` is a ``kind`` (of ``group``, with metadata ``where``); loads the plugins
    only when ``name`` is not a built-in component (and imports no built-in component)."""

    def known() -> bool:
        entry = _ENTRIES.get(_key(kind, name, group))
        if entry is not None:
            return _matches(kind, group, entry.group, entry.extra, where)
        row = _INDEX.get(_key(kind, name, group))
        return row is not None and _matches(kind, group, row[1], row[3], where)

    if known():
        return True
    _load_plugins()
    return known()


def get_entry(kind: str, name: str, group: str | None = None) -> Entry:
    """Look up an entry, importing only the module that registers it.

    Raises:
        ConfigError: Listing the valid names when ``name`` is not registered, or naming the
            extra to install when its module needs an optional package that is missing.
    """
    key = _key(kind, name, group)
    if key not in _ENTRIES and key in _INDEX:
        module = _INDEX[key][2]
        load_module(module, f"{kind} '{name}'")
        if key not in _ENTRIES:
            raise ConfigError(f"{kind} '{name}': the component index names {module}, which does not register it; "
                              "rebuild the index with python -m attnas.registry")
    if key not in _ENTRIES:
        _load_plugins()
    if key not in _ENTRIES:
        what = f"{kind}" + (f" in pool '{group}'" if group else "")
        raise ConfigError(unknown_name(what, name, names(kind, group)))
    return _ENTRIES[key]


def get(kind: str, name: str, group: str | None = None) -> Any:
    """The registered class or factory called ``name``."""
    return get_entry(kind, name, group).obj


def create(kind: str, name: str, *args: Any, group: str | None = None, **kwargs: Any) -> Any:
    """Instantiate the registered ``name`` with ``args`` and ``kwargs``."""
    return get(kind, name, group)(*args, **kwargs)


def index_rows() -> list[tuple[str, str, str, str, dict]]:
    """The rows of ``attnas._component_index`` as the built-in modules register them:
    ``(kind, name, group, module, extra)`` (imports every component module)."""
    discover()
    rows = [(e.kind, e.name, e.group, e.module, dict(sorted(e.extra.items()))) for e in _ENTRIES.values()
            if e.module.startswith("attnas.")]
    return sorted(rows, key=lambda r: (KINDS.index(r[0]), r[2], r[1]))


def index_source(rows: list[tuple[str, str, str, str, dict]]) -> str:
    """The text of ``attnas._component_index`` for ``rows``."""
    lines = [f"    {row!r}," for row in rows]
    return INDEX_HEADER + "COMPONENTS = (\n" + "\n".join(lines) + "\n)\n"


INDEX_HEADER = '''"""Where each built-in component is registered: (kind, name, group, module, metadata).

The registry (``attnas.registry``) reads this table to import only the module of a
name it looks up. Written by ``python -m attnas.registry``, which imports every
component module; a test checks that it matches what the modules register.
"""

'''


if __name__ == "__main__":  # rewrite attnas/_component_index.py from what the modules register
    from pathlib import Path

    from attnas import registry

    path = Path(registry.__file__).with_name("_component_index.py")
    path.write_text(registry.index_source(registry.index_rows()), encoding="utf-8")
    print(f"{path}: {len(registry.index_rows())} components")
