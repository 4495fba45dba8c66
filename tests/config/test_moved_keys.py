"""Keys that moved into nested sections (``moved_keys``): old recipes, ``--set`` keys and run
folders load with the same meaning, and every shipped recipe keeps its settings."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field

import pytest
import torch

from attnas.config import (
    CheckedConfig,
    OptimConfig,
    TrainConfig,
    apply_overrides,
    config_from_dict,
    from_mapping,
    load_config,
    moved_into,
    with_defaults,
)
from attnas.config.moved_keys import nest_moved
from attnas.config.yaml_loading import load_yaml
from attnas.core.errors import ConfigError
from attnas.graphvae.train import VAETrainConfig
from attnas.strategies.graph_vae import GraphVAEStrategyConfig
from attnas.strategies.latent_bo import LatentVAEConfig
from attnas.strategies.mechanism_search import SupernetTrainingConfig
from attnas.training.train import make_optimizer
from tests.config.effective_settings import FIXTURE, effective_settings

# The strategy section of a run folder's config.yaml written before the optimiser options of
# mechanism-search's supernet moved under ``optim:`` (a dartformer-listops-quick search).
OLD_STRATEGY_YAML = """
strategy:
  name: mechanism-search
  mode: homogeneous
  supernet:
    epochs: 8
    patience: 2
    lr: 0.002
    weight_decay: 0.01
    optimizer: adamw
    momentum: 0.9
    scheduler: none
    lr_min: 0.0
    batch_size: 64
    grad_clip: 0.0
    eval_every: 1
    checkpoint_every: 1
  finetune_steps: 100
  score_batch_size: 250
  report_costs:
  - params
  - latency_ms
  costs:
    batch_size: null
    warmup: 1
    repeats: 5
    min_repeats: 2
    rtol: 0.1
    latency: auto
"""


# Options a section brought to an owner that did not have them, with the value the old code
# used for them: latent-bo's VAE trained with VAETrainConfig's defaults for these; darts and
# car-darts trained their weights by SGD with cosine annealing, which their optim section names.
ADDED_OPTIONS = {"strategy.vae.plateau_factor": 0.1, "strategy.vae.plateau_patience": 10,
                 "strategy.vae.max_batches": None, "strategy.vae.precision": "fp32",
                 "strategy.optimizer": "sgd", "strategy.scheduler": "cosine",
                 "space.layout": "homogeneous", "strategy.costs.task": {}, "strategy.relative_to": None,
                 "strategy.supernet.path_keep": 0}


def test_every_shipped_recipe_keeps_the_settings_it_had_before_the_move():
    expected = json.loads(FIXTURE.read_text())
    actual = effective_settings()
    assert sorted(actual) == sorted(expected)
    for name in expected:
        added = {k: v for k, v in actual[name].items() if k not in expected[name]}
        assert added == {k: v for k, v in ADDED_OPTIONS.items() if k in added}, name
        assert {k: v for k, v in actual[name].items() if k not in added} == expected[name], name


def _read(cls: type, data: dict, path: str):
    """``data`` read into ``cls`` as a recipe's section is: moved keys nested, then validated."""
    return from_mapping(cls, nest_moved(cls, data, path), path)


def test_the_graph_vae_strategies_train_with_the_settings_they_built_before():
    vae = _read(LatentVAEConfig, {"epochs": 20, "batch_size": 64, "lr": 0.005}, "strategy.vae")
    assert vae.train_settings(3) == VAETrainConfig(epochs=20, batch_size=64, lr=0.005, iterations=1, seed=3)
    assert LatentVAEConfig().train_settings(0) == VAETrainConfig(epochs=50, batch_size=32, lr=1e-3, iterations=1)
    gv = _read(GraphVAEStrategyConfig, {"model": "dvae-emb", "epochs": 3, "lr": 0.01, "max_batches": 2,
                                        "precision": "bf16", "plateau_patience": 4}, "strategy")
    assert gv.train_settings(5) == VAETrainConfig(epochs=3, batch_size=32, lr=0.01, plateau_factor=0.1,
                                                  plateau_patience=4, iterations=4, seed=5, max_batches=2,
                                                  precision="bf16")
    assert from_mapping(GraphVAEStrategyConfig, {"train": {"epochs": 3}}, "strategy").train.epochs == 3


def _old_run_config() -> dict:
    data = load_config("dartformer-listops-quick").to_dict()
    data["strategy"] = load_yaml(OLD_STRATEGY_YAML, "old config.yaml")["strategy"]
    return data


def test_an_old_run_folders_flat_supernet_options_build_the_same_training():
    sn = config_from_dict(_old_run_config()).strategy.options.supernet
    assert sn.train_config() == TrainConfig(
        lr=0.002, weight_decay=0.01, optimizer="adamw", momentum=0.9, scheduler="none", lr_min=0.0,
        batch_size=64, grad_clip=0.0, epochs=8, patience=2, init="scratch", eval_every=1)
    opt = make_optimizer([torch.nn.Parameter(torch.zeros(2))], sn.optim)
    assert type(opt) is torch.optim.AdamW
    assert opt.defaults["lr"] == 0.002 and opt.defaults["weight_decay"] == 0.01


def test_the_saved_config_is_nested_and_loads_back_the_same():
    config = config_from_dict(_old_run_config())
    saved = config.to_dict()["strategy"]["supernet"]
    assert "lr" not in saved and saved["optim"]["lr"] == 0.002
    assert config_from_dict(config.to_dict()) == config
    assert pickle.loads(pickle.dumps(config)) == config  # the with_defaults section class pickles by name


@pytest.mark.parametrize("key", ["strategy.supernet.lr", "strategy.supernet.optim.lr"])
def test_old_and_new_set_keys_mean_the_same(key):
    config = load_config("dartformer-listops-quick", [f"{key}=0.125"])
    assert config.strategy.options.supernet.optim.lr == 0.125
    # over a saved (nested) config too, as ``attnas retrain --set`` applies them
    again = config_from_dict(apply_overrides(load_config("dartformer-listops-quick").to_dict(), [f"{key}=0.25"]))
    assert again.strategy.options.supernet.optim.lr == 0.25


def test_a_bad_value_names_the_new_dotted_path():
    with pytest.raises(ConfigError, match=r"^strategy\.supernet\.optim\.lr: must be > 0, got -1"):
        load_config("dartformer-listops-quick", ["strategy.supernet.lr=-1"])


def test_a_key_given_flat_and_nested_in_one_recipe_is_refused():
    data = _old_run_config()
    data["strategy"]["supernet"]["optim"] = {"lr": 0.5}
    with pytest.raises(ConfigError, match=r"^strategy\.supernet\.lr: given twice, flat and as strategy\.supernet\.optim\.lr"):
        config_from_dict(data)


def test_the_section_defaults_stay_those_of_the_owner_when_only_some_keys_are_given():
    sn = _read(SupernetTrainingConfig, {"lr": 0.001}, "supernet")
    assert (sn.optim.lr, sn.optim.weight_decay, sn.optim.optimizer, sn.optim.batch_size) == (0.001, 0.1, "adamw", 32)


@dataclass(frozen=True)
class _Owner(CheckedConfig):
    optim: OptimConfig = field(default_factory=OptimConfig)
    moved_keys = moved_into(OptimConfig, "optim")


def test_a_section_that_is_not_a_mapping_is_reported():
    with pytest.raises(ConfigError, match=r"^x\.optim: expected a mapping, got 3"):
        _read(_Owner, {"lr": 0.1, "optim": 3}, "x")


def test_the_validator_reads_nested_sections_only():
    """The flat keys are moved once, where a recipe or saved config is read
    (:func:`~attnas.config.run.nest_moved_keys`); :func:`from_mapping` validates what it is given."""
    with pytest.raises(ConfigError, match=r"^supernet\.lr: unknown key"):
        from_mapping(SupernetTrainingConfig, {"lr": 0.001}, "supernet")


def test_with_defaults_keeps_the_types_and_checks_its_names():
    Sub = with_defaults(OptimConfig, "Sub", "doc", lr=0.5)
    assert Sub().lr == 0.5 and Sub.__module__ == __name__
    with pytest.raises(ConfigError, match=r"lr: must be > 0"):
        Sub(lr=0.0)
    with pytest.raises(TypeError, match="no field"):
        with_defaults(OptimConfig, "Bad", "doc", nope=1)


def test_a_recipe_on_a_nested_base_may_set_an_old_flat_key(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("base: dartformer-listops-quick\nstrategy: {supernet: {lr: 0.0625}}\n")
    sn = load_config(own).strategy.options.supernet
    base = load_config("dartformer-listops-quick").strategy.options.supernet
    assert sn.optim.lr == 0.0625
    assert sn.optim.weight_decay == base.optim.weight_decay and sn.epochs == base.epochs


# The graph-VAE training options as the code before the ``train:`` sections saved them in a
# run folder's config.yaml (``strategy`` of latent-bo-cora-quick and opemb-enas-quick).
OLD_LATENT_BO_VAE_YAML = """
model: gcn-emb
samples: 2000
hidden: 64
latent: 16
epochs: 20
batch_size: 64
lr: 0.005
iterations: 1
checkpoint_every: 5
"""
OLD_GRAPH_VAE_TRAINING_YAML = """
epochs: 2
batch_size: 32
lr: 0.001
plateau_factor: 0.1
plateau_patience: 10
iterations: 1
max_batches: null
precision: fp32
"""


def test_old_run_folders_of_the_graph_vae_strategies_train_the_same():
    data = load_config("latent-bo-cora-quick").to_dict()
    data["strategy"]["vae"] = load_yaml(OLD_LATENT_BO_VAE_YAML, "old config.yaml")
    vae = config_from_dict(data).strategy.options.vae
    assert vae.train_settings(7) == VAETrainConfig(epochs=20, batch_size=64, lr=0.005, iterations=1, seed=7)
    data = load_config("opemb-enas-quick").to_dict()
    del data["strategy"]["train"]
    data["strategy"].update(load_yaml(OLD_GRAPH_VAE_TRAINING_YAML, "old config.yaml"))
    gv = config_from_dict(data).strategy.options
    assert gv.train_settings(2) == VAETrainConfig(epochs=2, batch_size=32, lr=0.001, iterations=1, seed=2)
    assert config_from_dict(data) == load_config("opemb-enas-quick")


#: The strategy section of an ``autola-digits-quick`` run folder written before ``darts`` had
#: its ``optim`` section (the weight optimiser's keys flat).
OLD_DARTS_STRATEGY = {"name": "darts", "epochs": 4, "batch_size": 64, "lr": 0.05, "lr_min": 0.001, "arch_lr": 0.006}


def test_an_old_darts_run_folder_and_old_set_keys_load_into_the_optim_section():
    data = load_config("autola-digits-quick").to_dict()
    data["strategy"] = dict(OLD_DARTS_STRATEGY)
    assert config_from_dict(data) == load_config("autola-digits-quick")
    for key in ("strategy.lr", "strategy.optim.lr"):
        optim = load_config("fullattn-digits-quick", [f"{key}=0.125"]).strategy.options.optim
        assert (optim.lr, optim.lr_min, optim.optimizer) == (0.125, 0.0, "sgd")  # car-darts anneals to 0


def test_darts_names_the_one_weight_optimiser_it_runs():
    with pytest.raises(ConfigError, match=r"optim: the weights of a DARTS search are trained by SGD with cosine"):
        load_config("autola-digits-quick", ["strategy.optim.optimizer=adam"])
