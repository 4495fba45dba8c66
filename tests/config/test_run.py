"""Every shipped recipe validates to the same run configuration as before the options classes
shared a base: ``validated_snapshot.json`` holds the SHA-256 of each recipe's
``load_config(name).to_yaml()``. After changing a recipe or a default on purpose, write it again
with ``python tests/config/test_run.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from attnas.config import list_recipes, load_config

SNAPSHOT = Path(__file__).with_name("validated_snapshot.json")


def _sha(name: str) -> str:
    return hashlib.sha256(load_config(name).to_yaml().encode()).hexdigest()


def test_the_snapshot_covers_every_shipped_recipe():
    assert sorted(json.loads(SNAPSHOT.read_text())) == list_recipes()


@pytest.mark.parametrize("name", sorted(json.loads(SNAPSHOT.read_text())))
def test_every_shipped_recipe_validates_as_before(name):
    assert _sha(name) == json.loads(SNAPSHOT.read_text())[name], (
        f"{name} validates to another config than the snapshot's:\n{load_config(name).to_yaml()}")


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps({name: _sha(name) for name in list_recipes()}, indent=1, sort_keys=True) + "\n")
