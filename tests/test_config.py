"""Recipes, overrides and validation messages."""

from __future__ import annotations

import pytest

from attnas.config import TrainConfig, apply_overrides, from_mapping, list_recipes, load_config, read_yaml
from attnas.core.errors import ConfigError


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


def _option_classes():
    """Every options dataclass a recipe can reach: ``retrain`` and each registered component's, nested ones included."""
    import dataclasses
    import typing

    from attnas import registry

    registry.discover()
    todo = [TrainConfig] + [c for kind in ("task", "space", "strategy") for name in registry.names(kind)
                            if (c := getattr(registry.get(kind, name), "Config", None)) is not None]
    seen: list[type] = []

    def nested(tp):
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            yield tp
        if typing.get_origin(tp) is not typing.Annotated:
            for arg in typing.get_args(tp):
                yield from nested(arg)

    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        hints = typing.get_type_hints(cls, include_extras=True)
        todo += [d for f in dataclasses.fields(cls) if f.init for d in nested(hints[f.name])]
    return seen


#: Integer options that are identifiers, not quantities; each is checked against its valid set.
_NOT_QUANTITIES = {"CsvConfig.labels", "AutoAttendConfig.constraints"}


def test_every_numeric_option_declares_its_range():
    """Each int or float option of every component names its valid range in its type, and its
    default lies in it: the loader checks every value a recipe gives against it."""
    import dataclasses
    import typing

    from attnas.config import Range, coerce

    def numeric(tp):
        if typing.get_origin(tp) is typing.Annotated:
            return False
        return tp in (int, float) or any(numeric(a) for a in typing.get_args(tp))

    classes = _option_classes()
    assert len(classes) > 25
    unranged, bad_defaults = [], []
    for cls in classes:
        hints = typing.get_type_hints(cls, include_extras=True)
        for f in dataclasses.fields(cls):
            name = f"{cls.__name__}.{f.name}"
            if f.init and numeric(hints[f.name]) and name not in _NOT_QUANTITIES:
                unranged.append(name)
            if f.default is not dataclasses.MISSING and not dataclasses.is_dataclass(f.default):
                try:
                    coerce(f.default, hints[f.name], name)
                except ConfigError as exc:
                    bad_defaults.append(str(exc))
    assert not unranged, f"numeric options without a Range: {unranged}"
    assert not bad_defaults
    assert Range(0, 1, high_open=True).describe() == "in [0, 1)" and Range(1).describe() == ">= 1"


@pytest.mark.parametrize("value,message", [
    (float("nan"), "must be a finite number, got nan"),
    (float("inf"), "must be a finite number, got inf"),
    (10 ** 400, "must be a finite number"),
    (0, "must be > 0, got 0.0"),
])
def test_float_options_are_finite_and_in_range(value, message):
    with pytest.raises(ConfigError, match=f"^lr: {message}"):
        from_mapping(TrainConfig, {"lr": value})


def test_replace_validates_like_a_recipe():
    cfg = load_config("autoattend-cora-quick")
    assert cfg.replace(seed=7).seed == 7 and cfg.replace(seed=7).space == cfg.space
    with pytest.raises(ConfigError, match=r"seed: must be in \[0, "):
        cfg.replace(seed=-1)


def test_non_finite_numbers_in_free_form_options_are_refused():
    with pytest.raises(ConfigError, match=r"^task.options.k: must be a finite number, got nan$"):
        load_config("autoattend-cora-quick", ["task.options={k: .nan}"])


def test_options_built_in_python_are_held_to_the_ranges_of_their_types():
    from attnas.data.text_csv import CsvOptions
    from attnas.graphvae.train import TrainSettings
    from attnas.graphvae.vae import GraphVAEConfig
    from attnas.strategies.one_shot_config import OneShotEvolutionConfig, SupernetConfig

    with pytest.raises(ConfigError, match=r"^epochs: must be >= 1, got 0$"):
        TrainConfig(epochs=0)
    with pytest.raises(ConfigError, match=r"^context_warmup: must be in \[0, 1\), got 1.0$"):
        SupernetConfig(context_warmup=1.0)
    with pytest.raises(ConfigError, match=r"^score_threads: must be >= 1, got 0$"):
        OneShotEvolutionConfig(score_threads=0)  # an optional value: checked when given
    assert OneShotEvolutionConfig(score_threads=None).score_threads is None
    with pytest.raises(ConfigError, match=r"^csv.val_fraction: must be in \[0, 1\), got 1.5$"):
        CsvOptions(val_fraction=1.5)
    with pytest.raises(ConfigError, match=r"^encoder: 'gin' is not a valid choice; valid: dvae, gcn$"):
        GraphVAEConfig(encoder="gin")
    with pytest.raises(ConfigError, match=r"^plateau_factor: must be in \(0, 1\), got 1.0$"):
        TrainSettings(plateau_factor=1.0)
    # checks that relate several fields stay with their dataclass
    with pytest.raises(ConfigError, match="below 1"):
        CsvOptions(val_fraction=0.5, test_fraction=0.5)


def test_config_is_a_package_of_small_modules_importable_from_one_name():
    from pathlib import Path

    import attnas.config as config

    for name in config.__all__:
        assert hasattr(config, name), name
    for path in Path(config.__file__).parent.glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) < 500, path
    assert "autoattend-cora-quick" in config.list_recipes()  # the recipes folder is found from the package
