"""The full-attention NAS recipes: paper settings, equal budgets for the ablations and the baseline."""

from __future__ import annotations

import json

import pytest

from attnas import pipeline
from attnas.config import list_recipes, load_config
from attnas.ops.fullattn.self_attention_block import CANDIDATES

DATASETS = ("cifar10", "fashionmnist")
VARIANTS = ("", "-no-car", "-no-sss-no-car", "-local-sa")


def test_all_fullattn_recipes_are_shipped():
    names = set(list_recipes())
    for ds in DATASETS:
        for v in VARIANTS:
            assert f"fullattn-{ds}{v}" in names
    assert "fullattn-digits-quick" in names


@pytest.mark.parametrize("ds", DATASETS)
def test_search_follows_the_paper(ds):
    cfg = load_config(f"fullattn-{ds}")
    s, sp, r = cfg.strategy.options, cfg.space.options, cfg.retrain
    assert cfg.strategy.name == "car-darts" and s.car
    assert (sp.init_channels, sp.final_channels, sp.shared_stages) == (16, 96, False)  # Sec. IV.B, IV.C
    # search phase (Sec. IV.B.1): 20 epochs, SGD 0.025 cosine to 0, momentum 0.9, wd 3e-4; alpha zero, Adam 3e-4, wd 1e-3
    w = s.optim
    assert (s.pretext_epochs, w.lr, w.lr_min, w.momentum, w.weight_decay) == (20, 0.025, 0.0, 0.9, 3e-4)
    assert (s.alpha_init, s.pretext_arch_lr, s.arch_weight_decay, s.mask_fraction) == ("zeros", 3e-4, 1e-3, 0.25)
    # fine-tuning (Sec. IV.B.2): 50 epochs, alpha from the search phase, Adam 1e-4
    assert (s.epochs, s.arch_lr) == (50, 1e-4)
    # final training (Sec. IV.C): SGD 0.04 cosine to 0, momentum 0.9, wd 4e-4, from scratch
    assert (r.optimizer, r.lr, r.lr_min, r.momentum, r.weight_decay, r.init) == ("sgd", 0.04, 0.0, 0.9, 4e-4, "scratch")
    if ds == "cifar10":
        assert r.epochs == 500


@pytest.mark.parametrize("ds", DATASETS)
def test_ablations_and_baseline_share_task_width_and_budget(ds):
    ref = load_config(f"fullattn-{ds}")
    for v in VARIANTS[1:]:
        cfg = load_config(f"fullattn-{ds}{v}")
        assert (cfg.task, cfg.retrain, cfg.seed) == (ref.task, ref.retrain, ref.seed), v
        sp = cfg.space.options
        assert (sp.init_channels, sp.final_channels, sp.reduction) == (16, 96, 2), v
        if v != "-local-sa":
            s = cfg.strategy.options
            assert not s.car and s.alpha_init == "normal", v  # "initialized randomly" (Sec. IV.G.2)
            assert (s.epochs, s.arch_lr, s.optim.lr) == (ref.strategy.options.epochs, 1e-4, 0.025), v
    assert load_config(f"fullattn-{ds}-no-sss-no-car").space.options.shared_stages
    base = load_config(f"fullattn-{ds}-local-sa")
    assert base.strategy.name == "fixed"
    assert base.strategy.options.arch["layers"] == ["local_sa_k7_h8"] * 15 and "local_sa_k7_h8" in CANDIDATES


def test_digits_quick_runs_both_phases_and_retrains():
    cfg = load_config("fullattn-digits-quick")
    assert cfg.task.options.dataset == "digits" and cfg.strategy.options.car
    assert cfg.retrain.init == "scratch"


TINY = ["space.init_channels=8", "space.reduction=1", "space.final_channels=8", "task.train_subset=60",
        "task.test_subset=30", "task.batch_size=30", "retrain.epochs=1",
        "retrain.batch_size=30"]


@pytest.mark.parametrize("recipe, extra", [
    ("fullattn-digits-quick", ["strategy.pretext_epochs=1", "strategy.epochs=1", "strategy.optim.batch_size=30"]),
    ("fullattn-fashionmnist-no-sss-no-car", ["task.resize=8", "strategy.epochs=1", "strategy.optim.batch_size=30"]),
    ("fullattn-fashionmnist-local-sa", ["task.resize=8"]),
])
def test_recipes_run_with_tiny_overrides(tmp_path, data_root, recipe, extra):
    run = pipeline.search(recipe, TINY + extra, out=tmp_path / "run", data_dir=data_root, device="cpu")
    metrics = json.loads(run.file("metrics.json").read_text())
    assert 0 <= metrics["test_accuracy"] <= 1 and metrics["params"] > 0
    layers = json.loads(run.file("arch.json").read_text())["choices"]["layers"]
    assert len(layers) == 15 and set(layers) <= set(CANDIDATES)
