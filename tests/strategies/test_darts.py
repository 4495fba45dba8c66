"""First-order DARTS: end to end through the pipeline, the bilevel steps, alpha options, errors."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from attnas import registry, pipeline
from attnas.config import load_config
from attnas.core.arch import load_arch
from attnas.core.errors import CheckpointError, ConfigError, RunDirError, UnsupportedError
from attnas.runs.rng import seed_everything
from attnas.runs.run_dir import RunDir
from attnas.spaces.hoga import HOGAConfig, HOGASpace
from attnas.strategies.darts import BilevelPhase, Darts, DartsConfig, bilevel_splits, load_alpha
from attnas.strategies.darts_config import DartsOptimConfig
from attnas.tasks.image_classification import ImageClassificationConfig, ImageClassificationTask

TINY_DARTS = {
    "name": "tiny-darts",
    "seed": 0,
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 160, "test_subset": 60,
             "val_fraction": 0.25, "batch_size": 40, "eval_batch_size": 200},
    "space": {"name": "hoga", "width": 4, "groups": 2},
    "strategy": {"name": "darts", "epochs": 3, "batch_size": 30, "arch_lr": 0.05},
    "retrain": {"epochs": 2, "optimizer": "sgd", "lr": 0.05, "patience": 0, "batch_size": 40},
}


def tiny(**strategy) -> dict:
    return {**TINY_DARTS, "strategy": {**TINY_DARTS["strategy"], **strategy}}


def tiny_parts(**strategy):
    cfg = load_config(tiny(**strategy))
    space = HOGASpace(cfg.space.options)
    task = ImageClassificationTask(cfg.task.options)
    return cfg, space, task


def test_registered_and_needs_a_relaxed_space():
    assert registry.get("strategy", "darts") is Darts
    assert Darts.requires == ("relaxed",)


def test_search_end_to_end(tmp_path):
    run = pipeline.search(tiny(), out=tmp_path / "run")
    cfg, space, task = tiny_parts()
    arch = load_arch(run.file("arch.json"), space)  # a valid hoga architecture
    assert arch.meta["strategy"] == "darts"
    metrics = json.loads(run.file("metrics.json").read_text())
    for key in ("search_seconds", "search_epochs", "relaxed_val_accuracy", "val_accuracy", "test_accuracy", "params"):
        assert key in metrics, key
    assert metrics["search_epochs"] == 3 and 0 <= metrics["relaxed_val_accuracy"] <= 1
    events = run.events("darts")
    assert [e["epoch"] for e in events] == [1, 2, 3]
    for e in events:
        assert {"loss", "arch_loss", "val", "lr", "arch", "alpha"} <= set(e)
        space.validate(space.arch(e["arch"]))
    assert events[-1]["arch"] == arch.choices
    # cosine schedule from lr towards lr_min, one value per epoch
    lrs = [e["lr"] for e in events]
    assert lrs[0] == pytest.approx(0.025) and lrs[0] > lrs[1] > lrs[2] > 0.001
    # alpha moved away from its initialisation, and the derived cell is its argmax
    seed_everything(cfg.seed)
    alpha0 = space.relaxed(task).alpha.detach()
    final = run.load_checkpoint("darts")
    assert final["state"]["done"] and final["step"] == 3
    alpha = final["state"]["alpha"][0]
    assert (alpha - alpha0).abs().max() > 1e-2
    relaxed = space.relaxed(task)
    relaxed.load_state_dict(final["state"]["model"])
    assert space.derive(relaxed).choices == arch.choices
    # the snapshot in the last event is softmax(alpha)
    snap = torch.tensor(events[-1]["alpha"][0])
    assert torch.allclose(snap, torch.softmax(alpha, -1), atol=1e-4)


class _Toy(nn.Module):
    """Loss (w - t)^2 + (a - t)^2: w learns from the weight split, a from the architecture split."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
        self.a = nn.Parameter(torch.zeros(1))

    def arch_parameters(self):
        return [self.a]

    def weight_parameters(self):
        return [self.w]


class _ToyTask:
    name, device, metric = "toy", torch.device("cpu"), "accuracy"
    bilevel_splits = ("train_a", "train_b")
    seen: list

    def batches(self, split, shuffle=False, generator=None, batch_size=None):
        target = {"train_a": 1.0, "train_b": -1.0}[split]
        for _ in range(4):
            self.seen.append(split)
            yield torch.full((batch_size,), target)


class _ToySpace:
    name = "toy"

    def require(self, capability, strategy):
        pass


def test_weights_learn_from_train_a_and_alpha_from_train_b(tmp_path):
    task = _ToyTask()
    task.seen = []
    run = RunDir.create(tmp_path / "run", "name: toy\n", {})
    opts = DartsConfig(epochs=20, optim=DartsOptimConfig(batch_size=2, lr=0.1, lr_min=0.1, momentum=0.0,
                                                         weight_decay=0.0, grad_clip=0.0),
                       arch_lr=0.1, arch_weight_decay=0.0)
    strategy = Darts(opts, _ToySpace(), task, run, seed=0)
    model = _Toy()

    def loss(batch):
        t = batch.mean()
        return (model.w - t).pow(2).sum() + (model.a - t).pow(2).sum()

    phase = BilevelPhase(tag="toy", module=model, weights=[model.w], alpha=[model.a], loss=loss,
                         splits=("train_a", "train_b"), epochs=20, arch_lr=0.1)
    summary = strategy.run_phase(phase)
    run.close()
    assert model.w.item() == pytest.approx(1.0, abs=1e-3)  # only ever stepped on train_a
    assert model.a.item() == pytest.approx(-1.0, abs=0.05)  # only ever stepped on train_b
    # strictly alternating: one weight batch, then one architecture batch
    assert task.seen[:6] == ["train_a", "train_b"] * 3
    assert summary["seconds"] >= 0 and len(run.events("toy")) == 20


def test_alpha_init_options(tmp_path):
    cfg, space, task = tiny_parts()
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    try:
        for init, check in (("zeros", lambda a: torch.count_nonzero(a) == 0),
                            ("normal", lambda a: 0.1 < a.std() < 10)):
            strategy = Darts(DartsConfig(alpha_init=init, alpha_init_scale=1.0), space, task, run)
            model = strategy.build_relaxed()
            strategy.init_alpha(model)
            assert check(model.alpha.detach()), init
            # every cell reads the one shared alpha
            assert all(cell.alpha is model.alpha for cell in model.cells())
        strategy = Darts(DartsConfig(), space, task, run)
        model = strategy.build_relaxed()
        before = model.alpha.detach().clone()
        strategy.init_alpha(model)  # "space": the space's N(0, 1) * 1e-3 stays
        assert torch.equal(model.alpha.detach(), before) and before.abs().max() < 1e-2
    finally:
        run.close()


def test_alpha_from_another_run(tmp_path):
    first = pipeline.search(tiny(epochs=1), out=tmp_path / "first")
    saved = first.load_checkpoint("darts")["state"]["alpha"][0]
    cfg, space, task = tiny_parts()
    run = RunDir.create(tmp_path / "second", "x: 1\n", {})
    try:
        strategy = Darts(DartsConfig(alpha_from=str(first.path)), space, task, run)
        model = strategy.build_relaxed()
        strategy.init_alpha(model)
        assert torch.equal(model.alpha.detach(), saved)
    finally:
        run.close()
    with pytest.raises(CheckpointError, match="no 'pretext' checkpoint"):
        load_alpha(first.path, "pretext", [tuple(saved.shape)])
    with pytest.raises(CheckpointError, match=r"has shapes \[\(3, 9\)\].*\(10, 9\)"):
        load_alpha(first.path, "darts", [(10, 9)])
    with pytest.raises(RunDirError, match="not a run directory"):
        load_alpha(tmp_path / "nowhere", "darts", [(3, 9)])


class _WithPretext(Darts):
    """A pretext phase on the same relaxed network (as the full-attention search will add one)."""

    def pretext(self, model):
        task = self.task
        phase = BilevelPhase(tag="pretext", module=model, weights=list(model.weight_parameters()),
                             alpha=list(model.arch_parameters()),
                             loss=lambda batch: task.loss(model(batch), batch), splits=("train_a", "train_b"),
                             epochs=2, arch_lr=0.05)
        summary = self.run_phase(phase)
        self.alpha_after_pretext = model.alpha.detach().clone()
        return {"pretext_loss": summary["loss"], "pretext_seconds": summary["seconds"]}


def test_pretext_hook_runs_first_and_hands_over_alpha(tmp_path):
    cfg, space, task = tiny_parts()
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    try:
        strategy = _WithPretext(DartsConfig(epochs=1, optim=DartsOptimConfig(batch_size=30), arch_lr=1e-9), space, task, run)
        result = strategy.search()
        assert [e["phase"] for e in run.events()] == ["pretext", "pretext", "darts"]
        assert "pretext_loss" in result.metrics and "pretext_seconds" not in result.metrics
        # with a negligible alpha learning rate in the main phase, alpha is the pretext's
        final = run.load_checkpoint("darts")["state"]["alpha"][0]
        assert torch.allclose(final, strategy.alpha_after_pretext, atol=1e-6)
    finally:
        run.close()


@pytest.mark.parametrize("bad, message", [
    ({"epochs": 0}, "epochs: must be >= 1"),
    ({"lr_min": 1.0}, "lr_min: must be in"),
    ({"arch_betas": [0.5]}, "arch_betas: expected two numbers"),
    ({"splits": ["train_a", "train_a"]}, "splits: expected two different split names"),
    ({"arch_lr": 0}, "arch_lr: must be > 0"),
    ({"alpha_init": "uniform"}, "alpha_init: 'uniform' is not a valid choice"),
    ({"arch_lr_": 0.1}, "did you mean 'arch_lr'"),
])
def test_bad_options_are_named(bad, message):
    with pytest.raises(ConfigError, match=message):
        load_config(tiny(**bad))


def test_refuses_a_space_without_relaxation(tmp_path):
    recipe = {**TINY_DARTS, "space": {"name": "resnet-attention"}}
    with pytest.raises(UnsupportedError, match="'relaxed'"):
        pipeline.search(recipe, out=tmp_path / "x")
    assert not (tmp_path / "x" / "config.yaml").exists()


def test_bilevel_split_protocol():
    assert bilevel_splits(ImageClassificationTask(ImageClassificationConfig())) == ("train_a", "train_b")
    assert bilevel_splits(object(), ("train", "val")) == ("train", "val")
    with pytest.raises(UnsupportedError, match="no bilevel splits.*strategy.splits"):
        bilevel_splits(object())


def test_unknown_split_in_options_is_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown split 'train_c'"):
        pipeline.search(tiny(splits=["train_a", "train_c"]), out=tmp_path / "run")


def test_derive_of_an_untrained_hoga_is_valid():
    space = HOGASpace(HOGAConfig(width=4, groups=2))
    task = ImageClassificationTask(ImageClassificationConfig(train_subset=50))
    space.validate(space.derive(space.relaxed(task)))
