"""One registry for spaces, strategies, tasks, datasets and operations.

Components register themselves with a decorator where they are defined::

    @register_space("autoattend")
    class AutoAttendSpace(Space): ...

and are looked up by name with :func:`get` or built with :func:`create`. An unknown
name raises :class:`~attnas.errors.ConfigError` listing the valid choices. The first
lookup imports every module of the component packages (``attnas.spaces``,
``attnas.strategies``, ``attnas.tasks``, ``attnas.data``, ``attnas.ops``) so that a new
component only needs a new file, plus any modules advertised by installed packages
under the ``attnas.plugins`` entry-point group.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnas.errors import ConfigError, unknown_name

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
    """

    kind: str
    name: str
    obj: Any
    group: str = ""
    help: str = ""
    extra: dict = field(default_factory=dict)


_ENTRIES: dict[tuple[str, str], Entry] = {}
_discovered = False


def _first_doc_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _key(kind: str, name: str, group: str | None) -> tuple[str, str]:
    """Registry key: operations are keyed per pool (group); other kinds by name alone."""
    return (kind, f"{group}/{name}" if kind == "op" and group else name)


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
        if old is not None and old.obj is not obj and getattr(old.obj, "__qualname__", None) != getattr(
            obj, "__qualname__", object()
        ):
            raise ValueError(f"{kind} {key[1]!r} is registered twice ({old.obj!r} and {obj!r})")
        _ENTRIES[key] = Entry(kind, name, obj, group, help or _first_doc_line(obj), dict(extra))
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


def discover() -> None:
    """Import every component module once so their decorators run."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for pkg_name in _PACKAGES:
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
            if info.name.rsplit(".", 1)[-1].startswith("_"):
                continue
            importlib.import_module(info.name)
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group="attnas.plugins"):
            ep.load()
    except Exception as exc:  # a broken third-party plugin must not hide our own components
        import warnings

        warnings.warn(f"an attnas plugin failed to load: {exc}", stacklevel=2)


def entries(kind: str, group: str | None = None) -> list[Entry]:
    """All entries of ``kind`` (optionally of one ``group``), sorted by name."""
    discover()
    out = [e for (k, _), e in _ENTRIES.items() if k == kind and (group is None or e.group == group)]
    return sorted(out, key=lambda e: (e.group, e.name))


def names(kind: str, group: str | None = None) -> list[str]:
    """Registered names of ``kind`` (optionally of one ``group``)."""
    return [e.name for e in entries(kind, group)]


def get_entry(kind: str, name: str, group: str | None = None) -> Entry:
    """Look up an entry; raises :class:`ConfigError` listing valid names when absent."""
    discover()
    key = _key(kind, name, group)
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
