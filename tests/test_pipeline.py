"""attnas.pipeline: the final training's learning rate follows where its weights come from."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from attnas import pipeline
from attnas.config import TrainConfig
from attnas.core.errors import ConfigError


class _Strategy:
    """A strategy with shared weights (``weights=True``) or without (``initial_model`` gives None)."""

    def __init__(self, weights: bool):
        self.weights = weights

    def initial_model(self, arch):
        return nn.Linear(2, 2) if self.weights else None


@pytest.mark.parametrize("init, weights, finetune_lr, expected", [
    ("supernet", True, 5e-4, 5e-4),     # fine-tuning from shared weights: finetune_lr
    ("supernet", True, None, 5e-3),     # no finetune_lr: lr
    ("supernet", False, 5e-4, 5e-3),    # the strategy has no shared weights: from scratch at lr
    ("scratch", True, 5e-4, 5e-3),      # --init scratch (and compare's baselines): lr
])
def test_final_training_uses_finetune_lr_only_from_shared_weights(monkeypatch, init, weights, finetune_lr, expected):
    seen = {}

    def fake_fit(model, task, cfg, **kwargs):
        seen["lr"], seen["model"] = cfg.lr, model
        return "fitted"

    monkeypatch.setattr(pipeline, "fit", fake_fit)
    space = SimpleNamespace(build=lambda arch, task: nn.Linear(3, 3))
    task = SimpleNamespace(device=torch.device("cpu"))
    train = TrainConfig(lr=5e-3, finetune_lr=finetune_lr, init=init)
    out = pipeline.train_final(None, SimpleNamespace(seed=0, retrain=train), space, task, _Strategy(weights), arch=None)
    assert out == "fitted"
    assert seen["lr"] == pytest.approx(expected)
    assert seen["model"].in_features == (2 if init == "supernet" and weights else 3)


@pytest.mark.parametrize("value", [0.0, -1e-3, float("nan")])
def test_finetune_lr_must_be_a_positive_number(value):
    with pytest.raises(ConfigError, match="finetune_lr"):
        TrainConfig(finetune_lr=value)
