"""Options that moved into a nested section, and sections that share another class's fields.

An options class declares each option once: where it holds the options of another class
(an optimiser's, :class:`~attnas.config.OptimConfig`), it holds them as a nested section of
that class, with its own defaults where they differ (:func:`with_defaults`). Its
``moved_keys`` (:func:`moved_into`) list the keys that were flat before the section existed:
:func:`nest_moved_keys_of` puts them into the section as a recipe is read (through
:func:`attnas.config.run.nest_moved_keys`, the one caller, for recipes, ``--set`` keys and the
mapping :func:`~attnas.config.run.config_from_dict` validates), so old recipes, ``--set`` keys
and run folders' ``config.yaml`` load with the same meaning.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Annotated, Any

from attnas.core.errors import ConfigError


def nest_moved_keys_of(cls: type, data: dict, prefix: str, flat_wins: bool = False) -> dict:
    """``data`` with each flat key of ``cls.moved_keys`` moved into the nested section it now
    belongs to (``{lr: 0.1}`` -> ``{optim: {lr: 0.1}}``), so recipes, ``--set`` keys and run
    folders written before the section existed load with the same meaning.

    Args:
        cls: The options class ``data`` is read into.
        data: Its mapping.
        prefix: Dotted prefix for error messages.
        flat_wins: When a key is given both flat and inside its section, keep the flat one
            (a ``--set`` of the old key applied to an already nested mapping) instead of
            refusing.

    Raises:
        ConfigError: When a key is given both flat and inside its section (and not
            ``flat_wins``), or the section is not a mapping.
    """
    moved = getattr(cls, "moved_keys", {})
    flat = [k for k in data if k in moved]
    if not flat:
        return data
    data = dict(data)
    for key in flat:
        section = moved[key]
        inner = data.get(section)
        if inner is None:
            inner = {}
        if not isinstance(inner, dict):
            raise ConfigError(f"{prefix}{section}: expected a mapping, got {inner!r}")
        if key in inner and not flat_wins:
            raise ConfigError(f"{prefix}{key}: given twice, flat and as {prefix}{section}.{key}; "
                              f"keep {prefix}{section}.{key}")
        data[section] = {**inner, key: data.pop(key)}
    return data


def _dataclass_in(tp: Any) -> type | None:
    """The dataclass a field's type hint holds (``X``, ``X | None``, ``Annotated[X, ...]``), or ``None``."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _dataclass_in(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        found = [c for c in map(_dataclass_in, typing.get_args(tp)) if c is not None]
        return found[0] if len(found) == 1 else None
    return tp if isinstance(tp, type) and is_dataclass(tp) else None


def nest_moved(cls: type, data: Any, path: str = "", flat_wins: bool = False) -> Any:
    """:func:`nest_moved_keys_of` applied to ``data`` and to every nested options mapping in it.

    Args:
        cls: The options dataclass ``data`` is read into.
        data: Its raw mapping (anything else is returned as it is).
        path: Dotted prefix for error messages.
        flat_wins: See :func:`nest_moved_keys_of`.
    """
    if not isinstance(data, dict) or not is_dataclass(cls):
        return data
    prefix = f"{path}." if path else ""
    data = nest_moved_keys_of(cls, data, prefix, flat_wins)
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in fields(cls):
        sub = _dataclass_in(hints[f.name]) if f.init and isinstance(data.get(f.name), dict) else None
        if sub is not None:
            nested = nest_moved(sub, data[f.name], prefix + f.name, flat_wins)
            if nested is not data[f.name]:
                data = {**data, f.name: nested}
    return data


def moved_into(section_cls: type, section: str) -> dict[str, str]:
    """``moved_keys`` of an options class whose fields that ``section_cls`` declares moved
    into its section ``section`` (each, flat, now lives at ``<section>.<field>``)."""
    return {f.name: section for f in fields(section_cls) if f.init}


def with_defaults(cls: type, name: str, doc: str, **defaults: Any) -> type:
    """A frozen dataclass subclass of ``cls`` whose fields ``defaults`` default otherwise.

    The fields keep the types ``cls`` declares (one declaration of each option); only
    their defaults change, e.g. the optimiser of a supernet that defaults to AdamW.

    Args:
        cls: A dataclass type (e.g. :class:`~attnas.config.OptimConfig`).
        name: The subclass's name.
        doc: Its docstring.
        **defaults: New defaults by field name.

    Raises:
        TypeError: When a name is not a field of ``cls``.
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    unknown = sorted(set(defaults) - {f.name for f in fields(cls) if f.init})
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    sub = dataclasses.make_dataclass(
        name, [(k, hints[k], dataclasses.field(default=v)) for k, v in defaults.items()],
        bases=(cls,), frozen=True, namespace={"__doc__": doc})
    sub.__module__ = sys._getframe(1).f_globals.get("__name__", cls.__module__)
    sub.__qualname__ = name
    return sub
