"""Recipes that extend another (``base:``): name and path bases, merging, the tags, the errors,
and every shipped recipe resolving to the mapping it had before the recipes extended one another.

The snapshot ``recipe_snapshot.json`` holds the SHA-256 of each shipped recipe's resolved
mapping. After changing a recipe on purpose, write it again with
``python tests/config/test_recipe_base.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from attnas.config import list_recipes, load_config, read_recipe, read_yaml, recipe_dir
from attnas.config.loading import read_own_mapping
from attnas.core.errors import ConfigError

SNAPSHOT = Path(__file__).with_name("recipe_snapshot.json")


def _sha(mapping: dict) -> str:
    return hashlib.sha256(json.dumps(mapping, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_base_by_shipped_name_keeps_the_rest_and_drops_base(tmp_path):
    child = _write(tmp_path / "mine.yaml", "base: autoattend-cora-quick\nname: mine\nretrain: {epochs: 3}\n")
    parent = read_recipe("autoattend-cora-quick")
    got = read_recipe(child)
    assert "base" not in got and got["name"] == "mine" and got["retrain"]["epochs"] == 3
    assert {k: v for k, v in got["retrain"].items() if k != "epochs"} == \
        {k: v for k, v in parent["retrain"].items() if k != "epochs"}
    assert got["space"] == parent["space"] and got["strategy"] == parent["strategy"]
    assert load_config(child).retrain.epochs == 3
    assert read_yaml(child) == got  # what reads a recipe file gets it resolved


def test_base_by_relative_path_is_taken_from_the_recipe_folder(tmp_path, monkeypatch):
    _write(tmp_path / "common" / "base.yaml", "name: b\nseed: 4\ntask: {name: node-classification, dataset: cora}\n")
    child = _write(tmp_path / "sub" / "child.yaml", "base: ../common/base.yaml\nname: c\n")
    monkeypatch.chdir(tmp_path / "common")  # not the working directory's ../common
    assert read_recipe(child) == {"name": "c", "seed": 4, "task": {"name": "node-classification", "dataset": "cora"}}


def test_nested_bases_override_a_nested_key_and_replace_lists(tmp_path):
    _write(tmp_path / "a.yaml", "name: a\nspace: {name: s, opts: {x: 1, y: 2}, sizes: [1, 2, 3]}\nseed: 1\n")
    _write(tmp_path / "b.yaml", "base: a.yaml\nname: b\nspace: {opts: {y: 20}}\n")
    c = _write(tmp_path / "c.yaml", "base: b.yaml\nname: c\nspace: {sizes: [9]}\n")
    assert read_recipe(c) == {"name": "c", "seed": 1, "space": {"name": "s", "opts": {"x": 1, "y": 20}, "sizes": [9]}}


def test_replace_and_delete_tags(tmp_path):
    _write(tmp_path / "a.yaml", "name: a\nstrategy: {name: darts, epochs: 5}\ncompare: {seeds: 3}\n")
    c = _write(tmp_path / "c.yaml", "base: a.yaml\nstrategy: !replace {name: fixed, arch: {k: [1]}}\n"
                                    "compare: !delete\nextra: !delete\n")
    assert read_recipe(c) == {"name": "a", "strategy": {"name": "fixed", "arch": {"k": [1]}}}


def test_a_mapping_recipe_resolves_its_base_and_a_sweep_stores_the_resolved_mapping(tmp_path, monkeypatch):
    from attnas.scale.sweep import plan_sweep

    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "b.yaml", (recipe_dir() / "autola-digits-quick.yaml").read_text())
    mapping = {"base": "b.yaml", "name": "m", "seed": 7}
    assert read_recipe(mapping) == {**read_recipe("autola-digits-quick"), "name": "m", "seed": 7}
    plan = plan_sweep(mapping, seeds=2)
    assert "base" not in plan["recipe"] and [r["seed"] for r in plan["runs"]] == [7, 8]


@pytest.mark.parametrize(("files", "problem"), [
    ({"a.yaml": "base: b.yaml\nname: a\n", "b.yaml": "base: a.yaml\nname: b\n"},
     "b.yaml: base cycle a.yaml -> b.yaml -> a.yaml"),  # named where the cycle closes
    ({"a.yaml": "base: a.yaml\nname: a\n"}, "base cycle a.yaml -> a.yaml"),
    ({"a.yaml": "base: gone.yaml\nname: a\n"}, "base 'gone.yaml': recipe file"),
    ({"a.yaml": "base: autoattend-cora-quik\n"}, "base: unknown recipe 'autoattend-cora-quik' (did you mean"),
    ({"a.yaml": "base: [x]\n"}, "base must be a recipe name or a YAML path, got ['x']"),
    ({"a.yaml": "base: b.yaml\n", "b.yaml": "- 1\n- 2\n"}, "base 'b.yaml' is not a usable recipe"),
    ({"a.yaml": "base: b.yaml\n", "b.yaml": "name: [1\n"}, "malformed YAML"),
    ({"a.yaml": "base: b.yaml\nk:\n  - !delete\n", "b.yaml": "k: [1]\n"}, "!delete in a list"),
    ({"a.yaml": "k: !replace [1]\n"}, "!replace is for a mapping"),
    ({"a.yaml": "k: !delete yes\n"}, "!delete takes no value"),
])
def test_bad_bases_name_the_recipe_and_the_problem(tmp_path, files, problem):
    for name, text in files.items():
        _write(tmp_path / name, text)
    with pytest.raises(ConfigError) as err:
        read_recipe(tmp_path / "a.yaml")
    message = str(err.value)
    assert problem in message and str(tmp_path) in message and "\n" not in message
    if "not a usable" in problem:
        assert "a recipe must be a YAML mapping, got list" in message


def test_recipe_tags_are_refused_outside_recipe_files():
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config("autola-digits-quick", ["compare=!delete"])


@pytest.mark.parametrize("name", sorted(json.loads(SNAPSHOT.read_text())))
def test_every_shipped_recipe_resolves_as_before(name):
    assert name in list_recipes(), f"{name} is in {SNAPSHOT.name} but not shipped; write the snapshot again"
    resolved = read_recipe(name)
    assert _sha(resolved) == json.loads(SNAPSHOT.read_text())[name], (
        f"{name} resolves to another mapping than the snapshot's:\n{yaml.safe_dump(resolved, sort_keys=True)}")
    load_config(name)


def test_shipped_recipes_extend_by_name_and_describe_themselves():
    for name in list_recipes():
        own = read_own_mapping(recipe_dir() / f"{name}.yaml")
        assert own.get("name") == name and own.get("description"), name  # each variant says what it is
        assert "/" not in str(own.get("base", "")), f"{name}: a shipped recipe extends a shipped one by name"


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps({n: _sha(read_recipe(n)) for n in list_recipes()}, indent=1, sort_keys=True) + "\n")
