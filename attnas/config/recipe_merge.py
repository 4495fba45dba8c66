"""Laying a recipe over the recipe it extends (its ``base:``).

A recipe that names a ``base`` keeps only what differs from it. :func:`merge_recipe`
lays the recipe's mapping over its base's:

- a mapping is merged key by key, at every depth (``strategy: {epochs: 4}`` changes
  the base's ``strategy.epochs`` and keeps its other keys);
- a list or a value replaces the base's;
- a mapping tagged ``!replace`` replaces the base's mapping whole (a section that names
  another component, e.g. ``strategy: !replace {name: fixed, arch: ...}`` over a
  searching strategy, whose options would not apply);
- a key tagged ``!delete`` (``compare: !delete``) is removed from the base's mapping.

The tags are read by :func:`attnas.config.yaml_loading.load_yaml` (``recipe=True``);
the result holds plain mappings only.
"""

from __future__ import annotations

from typing import Any

from attnas.config.yaml_loading import DELETE, Replace
from attnas.core.errors import ConfigError


def merge_recipe(base: dict, recipe: dict, source: str) -> dict:
    """``recipe`` laid over ``base`` by the rules of the module docstring (neither is changed).

    Args:
        base: The resolved base mapping (plain, no tags).
        recipe: The extending mapping as read (``!replace`` / ``!delete`` values allowed).
        source: What an error message names (the recipe's file).

    Returns:
        A new plain mapping.
    """
    out = {key: _plain(value, source) for key, value in base.items()}
    for key, value in recipe.items():
        if value is DELETE:
            out.pop(key, None)
        elif isinstance(value, dict) and not isinstance(value, Replace) and isinstance(out.get(key), dict):
            out[key] = merge_recipe(out[key], value, source)
        else:
            out[key] = _plain(value, source)
    return out


def _plain(value: Any, source: str) -> Any:
    """A copy of ``value`` without tags: ``!replace`` mappings made plain, ``!delete`` keys dropped."""
    if isinstance(value, dict):
        return {k: _plain(v, source) for k, v in value.items() if v is not DELETE}
    if isinstance(value, list):
        if any(v is DELETE for v in value):
            raise ConfigError(f"{source}: !delete in a list; it removes a mapping's key (`key: !delete`)")
        return [_plain(v, source) for v in value]
    return value
