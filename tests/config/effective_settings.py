"""Record every shipped recipe's validated settings as flat dotted keys, in the pre-nesting key names.

``effective_settings.json`` was written by this script with the code before the optimiser
fields of option classes moved into nested sections (``optim:``); ``test_moved_keys.py``
checks that the current code validates every recipe to the same values under the same old
names (a moved key ``a.lr`` is read at its new place ``a.optim.lr``). Rewrite the file only
when a recipe's settings are meant to change: ``python tests/config/effective_settings.py``.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from attnas.config import list_recipes, load_config
from attnas.config.run import ComponentConfig

FIXTURE = Path(__file__).with_name("effective_settings.json")


def legacy_flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``obj``'s values by dotted key, a moved section's fields under their old flat names."""
    if isinstance(obj, ComponentConfig):
        return {f"{prefix}name": obj.name, **legacy_flat(obj.options, prefix)}
    if not is_dataclass(obj):
        return {prefix[:-1]: list(obj) if isinstance(obj, tuple) else obj}
    moved = getattr(type(obj), "moved_keys", {})
    out: dict[str, Any] = {}
    for f in fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if f.name in set(moved.values()):
            out.update(legacy_flat(value, prefix))  # the section's fields at the owner's level, as before
        else:
            out.update(legacy_flat(value, f"{prefix}{f.name}."))
    return out


def effective_settings() -> dict[str, dict[str, Any]]:
    """Every shipped recipe's :func:`legacy_flat` settings, by recipe name."""
    return {name: legacy_flat(load_config(name)) for name in list_recipes()}


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(effective_settings(), indent=0, sort_keys=True) + "\n")
