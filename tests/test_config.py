"""Recipes, overrides and validation messages."""

from __future__ import annotations

import pytest

from attnas.config import TrainConfig, apply_overrides, from_mapping, list_recipes, load_config, read_yaml
from attnas.errors import ConfigError


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_shipped_recipe_validates(recipe):
    cfg = load_config(recipe)
    assert cfg.name == recipe
    # the resolved config round-trips through YAML into an identical config
    from attnas.config import config_from_dict
    import yaml

    assert config_from_dict(yaml.safe_load(cfg.to_yaml())) == cfg


def test_set_overrides_nested_keys_and_types():
    cfg = load_config("autoattend-cora-quick", ["space.hidden=32", "strategy.supernet.epochs=7", "seed=3",
                                                 "space.constraints=[1, 3]"])
    assert cfg.space.options.hidden == 32
    assert cfg.strategy.options.supernet.epochs == 7
    assert cfg.seed == 3
    assert cfg.space.options.constraints == (1, 3)


@pytest.mark.parametrize("override,message", [
    ("space.hiden=3", "space.hiden: unknown key (did you mean 'hidden'?)"),
    ("space.hidden=abc", "space.hidden: expected an integer, got 'abc'"),
    ("space.context=xc", "space.context: 'xc' is not a valid choice"),
    ("strategy.supernet.epochz=1", "strategy.supernet.epochz: unknown key (did you mean 'epochs'?)"),
    ("retrain.optimizer=rmsprop", "retrain.optimizer: 'rmsprop' is not a valid choice"),
    ("space.name=autoatend", "unknown space 'autoatend' (did you mean 'autoattend'?)"),
    ("space.dropout=true", "space.dropout: expected a number, got True"),
    ("retrain.epochs=0", "epochs: must be >= 1"),
    ("space.constraints=[4]", "[4] are not constraints"),
    ("tsk.name=x", "tsk: unknown key (did you mean 'task'?)"),
])
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config("autoattend-cora-quick", [override])
    assert message in str(err.value)


def test_override_syntax_errors():
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config("autoattend-cora-quick", ["space.hidden"])
    with pytest.raises(ConfigError, match="not valid YAML"):
        apply_overrides({}, ["a=[1, 2"])


def test_malformed_yaml_reports_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ntask: {name: node-classification\nspace: 3\n")
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+"):
        read_yaml(p)


def test_unknown_recipe_lists_valid_ones():
    with pytest.raises(ConfigError, match="unknown recipe 'autoattend-corra'.*did you mean 'autoattend-cora'"):
        load_config("autoattend-corra")


def test_missing_required_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="strategy: required key is missing"):
        load_config({"name": "x", "task": {"name": "node-classification"}, "space": {"name": "autoattend"}})
    with pytest.raises(ConfigError, match="task: expected a mapping"):
        load_config({"name": "x", "task": "cora", "space": {"name": "autoattend"}, "strategy": {"name": "fixed"}})
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        read_yaml(p)


def test_train_config_defaults_and_frozen():
    cfg = from_mapping(TrainConfig, {"epochs": 5, "lr": 1})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    with pytest.raises(Exception):
        cfg.epochs = 3  # frozen
