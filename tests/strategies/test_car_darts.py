"""car-darts: context auto-regression then DARTS fine-tuning, end to end, and its pieces."""

from __future__ import annotations

import json

import pytest
import torch

from attnas import registry, pipeline
from attnas.config import load_config
from attnas.core.arch import load_arch
from attnas.core.errors import ConfigError
from attnas.models.car_decoder import ContextAutoregressionModel
from attnas.models.stagewise_network import RelaxedStagewiseNetwork
from attnas.runs.rng import seed_everything
from attnas.spaces.stagewise import StagewiseSpace
from attnas.strategies.car_darts import CarDarts, CarDartsConfig, masked_reconstruction_loss
from attnas.strategies.darts import Darts
from attnas.tasks._context_autoregression import context_masks, mask_images, masked_l1_loss

TINY_CAR = {
    "name": "tiny-car",
    "seed": 0,
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 80, "test_subset": 40,
             "val_fraction": 0.25, "batch_size": 30, "eval_batch_size": 200},
    "space": {"name": "stagewise", "init_channels": 8, "reduction": 1},
    "strategy": {"name": "car-darts", "pretext_epochs": 2, "epochs": 1, "batch_size": 30,
                 "pretext_arch_lr": 0.05, "arch_lr": 0.05},
    "retrain": {"epochs": 1, "optimizer": "sgd", "lr": 0.05, "patience": 0, "batch_size": 40},
}


def tiny(space=None, **strategy) -> dict:
    return {**TINY_CAR, "space": {**TINY_CAR["space"], **(space or {})},
            "strategy": {**TINY_CAR["strategy"], **strategy}}


def test_registered_as_a_darts_subclass_with_the_paper_defaults():
    assert registry.get("strategy", "car-darts") is CarDarts
    assert issubclass(CarDarts, Darts) and CarDarts.requires == ("relaxed",)
    c = CarDartsConfig()
    # Sec. IV.B: search 20 epochs (alpha Adam 3e-4), fine-tune 50 epochs (alpha Adam 1e-4),
    # SGD 0.025 cosine to zero, momentum 0.9, wd 3e-4, alpha wd 1e-3, alpha from zero
    assert (c.pretext_epochs, c.epochs, c.pretext_arch_lr, c.arch_lr) == (20, 50, 3e-4, 1e-4)
    w = c.optim
    assert (w.optimizer, w.scheduler, w.lr, w.lr_min, w.momentum, w.weight_decay, c.arch_weight_decay) == (
        "sgd", "cosine", 0.025, 0.0, 0.9, 3e-4, 1e-3)
    assert c.alpha_init == "zeros" and c.car and c.mask_fraction == 0.25


@pytest.mark.parametrize("bad, match", [
    ({"pretext_epochs": 0}, "pretext_epochs"),
    ({"mask_fraction": 0.0}, "mask_fraction"),
    ({"mask_boxes": 0}, "mask_boxes"),
    ({"pretext_arch_lr": -1.0}, "pretext_arch_lr"),
    ({"alpha_init": "ones"}, "alpha_init"),
])
def test_bad_options_name_the_option(bad, match):
    with pytest.raises(ConfigError, match=match):
        load_config(tiny(**bad))


def test_masked_reconstruction_loss_is_l1_on_the_hidden_pixels():
    torch.manual_seed(0)
    images = torch.randn(3, 1, 8, 8)
    seed_everything(0)
    net = RelaxedStagewiseNetwork(1, 10, init_channels=8, reduction=1)
    model = ContextAutoregressionModel(net, 1).eval()
    got = masked_reconstruction_loss(model, images, generator=torch.Generator().manual_seed(5))
    mask = context_masks(3, 8, 8, generator=torch.Generator().manual_seed(5))
    assert mask.any() and not mask.all()
    with torch.no_grad():
        recon = model(mask_images(images, mask))
    hidden = mask.expand_as(images)
    want = (recon - images).abs()[hidden].mean()
    assert torch.allclose(got, want) and torch.allclose(got, masked_l1_loss(recon, images, mask))


def _alpha(run, tag):
    return run.load_checkpoint(tag)["state"]["alpha"][0]


def test_search_runs_both_phases_and_finetunes_from_the_car_alpha(tmp_path):
    run = pipeline.search(tiny(), out=tmp_path / "run")
    cfg = load_config(tiny())
    space = StagewiseSpace(cfg.space.options)
    arch = load_arch(run.file("arch.json"), space)
    assert arch.meta["strategy"] == "car-darts"
    pre, fine = run.events("pretext"), run.events("darts")
    assert [e["epoch"] for e in pre] == [1, 2] and [e["epoch"] for e in fine] == [1]
    for e in pre:
        assert {"loss", "arch_loss", "val_l1", "arch", "alpha"} <= set(e) and e["loss"] > 0
    # alpha left zero in the search phase, and the fine-tuning phase started from it
    a_pre, a_fine = _alpha(run, "pretext"), _alpha(run, "darts")
    assert a_pre.abs().max() > 1e-3
    assert (a_fine - a_pre).abs().max() > 0
    # with Adam at lr 0.05 for 2 steps (1 epoch), alpha moves at most ~0.1 from its start
    assert (a_fine - a_pre).abs().max() <= 0.1 + 1e-6
    assert fine[0]["alpha"] != pre[-1]["alpha"]
    assert space.arch(fine[-1]["arch"]).choices == arch.choices
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["pretext_epochs"] == 2 and metrics["car_seconds"] > 0 and metrics["pretext_loss"] > 0
    assert metrics["search_seconds"] >= metrics["car_seconds"]
    assert 0 <= metrics["test_accuracy"] <= 1


def test_without_car_only_the_classification_phase_runs_from_random_alpha(tmp_path):
    run = pipeline.search(tiny(car=False, alpha_init="normal", alpha_init_scale=1.0), out=tmp_path / "run")
    assert run.events("pretext") == [] and run.load_checkpoint("pretext") is None
    assert [e["epoch"] for e in run.events("darts")] == [1]
    assert "car_seconds" not in json.loads(run.file("metrics.json").read_text())


def test_shared_stages_ablation_searches_six_rows_and_repeats_them(tmp_path):
    run = pipeline.search(tiny(space={"shared_stages": True}, pretext_epochs=1), out=tmp_path / "run")
    assert tuple(_alpha(run, "darts").shape) == (6, 7)
    layers = json.loads(run.file("arch.json").read_text())["choices"]["layers"]
    for stage in (2, 4):  # stages 3 and 5 repeat stage 1
        assert layers[3 * stage:3 * stage + 3] == layers[0:3]
    assert layers[9:12] == layers[3:6]  # stage 4 repeats stage 2


def test_reset_weights_keeps_the_car_alpha_and_restarts_the_weights(tmp_path):
    from attnas.runs.run_dir import RunDir
    from attnas.tasks.image_classification import ImageClassificationTask

    cfg = load_config(tiny(pretext_epochs=1, reset_weights=True))
    space, task = StagewiseSpace(cfg.space.options), ImageClassificationTask(cfg.task.options)
    strategy = CarDarts(cfg.strategy.options, space, task, RunDir.create(tmp_path / "run", "x: 1\n", {}), seed=0)
    model = strategy.build_relaxed()
    fresh = {k: v.clone() for k, v in model.state_dict().items()}
    strategy.pretext(model)
    alpha = strategy.run.load_checkpoint("pretext")["state"]["alpha"][0]
    assert alpha.abs().max() > 0 and torch.equal(model.alpha.detach(), alpha)
    for key, value in model.state_dict().items():
        if key != "alpha":
            assert torch.equal(value, fresh[key]), key
