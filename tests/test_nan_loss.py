"""A NaN training loss in any strategy is one TrainingError naming the phase and the step
(exit status 1, one line), raised before any weight is updated from it; the run is kept,
marked failed, and resumes to the end.

Graph-VAE and sparse-GP training: ``tests/graphvae/test_train.py``, ``tests/graphvae/test_gp.py``.
"""

from __future__ import annotations

import copy
import json
import sys

import pytest
import torch
import yaml
from typer.testing import CliRunner

from attnas import pipeline
from attnas.cli import app
from attnas.core.errors import TrainingError, check_finite_loss
from attnas.tasks.image_classification import ImageClassificationTask
from attnas.tasks.node_classification import NodeClassificationTask
from attnas.tasks.sequence_classification import SequenceClassificationTask
from attnas_subprocess import FIXED_GCN

runner = CliRunner()

ONE_SHOT = {
    "name": "tiny-one-shot",
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 2, "hidden": 8, "pool": "pyg", "ops": ["zero", "identity", "gcn"],
              "heads": 2, "op_heads": 2},
    "strategy": {"name": "one-shot-evolution", "supernet": {"epochs": 6, "checkpoint_every": 2},
                 "evolution": {"population": 4, "parents": 2, "children": 2, "rounds": 1, "checkpoint_every": 2},
                 "rerank": {"top_k": 0}},
    "retrain": {"epochs": 2, "patience": 0},
}


DARTS = {
    "name": "tiny-darts",
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 40, "test_subset": 20,
             "val_fraction": 0.25},
    "space": {"name": "hoga", "width": 4, "groups": 2},
    "strategy": {"name": "darts", "epochs": 2, "batch_size": 10},
    "retrain": {"epochs": 1, "patience": 0, "batch_size": 10},
}

PRUNE = {
    "name": "tiny-prune",
    "task": {"name": "sequence-classification", "dataset": "listops", "batch_size": 16,
             "listops": {"min_length": 5, "max_length": 24, "max_depth": 3, "max_args": 4, "train_size": 32,
                         "val_size": 16, "test_size": 16}},
    "space": {"name": "attention-mechanisms", "candidates": ["softmax", "linear", "local"], "dim": 8, "depth": 1,
              "heads": 2, "ffn_dim": 8, "pool": "mean", "mechanism_options": {"local": {"window": 4}}},
    "strategy": {"name": "mechanism-search", "mode": "nas-prune",
                 "supernet": {"epochs": 1, "patience": 0, "batch_size": 16}, "finetune_steps": 2},
    "retrain": {"epochs": 1, "patience": 0, "batch_size": 16},
}


def nan_loss(monkeypatch, task_cls, after: int = 1, caller: str | None = None) -> None:
    """From the ``after``-th training loss on (one that needs gradients), ``task_cls.loss`` is NaN.

    Args:
        caller: Count only the losses computed in a function of this name.
    """
    original = task_cls.loss
    count = {"n": 0}

    def loss(self, output, batch):
        value = original(self, output, batch)
        if value.requires_grad and (caller is None or sys._getframe(1).f_code.co_name == caller):
            count["n"] += 1
            if count["n"] >= after:
                return value * float("nan")
        return value

    monkeypatch.setattr(task_cls, "loss", loss)


def search_fails_then_resumes(tmp_path, monkeypatch, recipe, message):
    """The search stops with status 1 and one line holding ``message``; without the NaN it resumes."""
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "run"
    r = runner.invoke(app, ["--threads", "1", "search", str(path), "--out", str(out)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert lines[0].startswith(f"error: {message}") and "--resume" in lines[0], lines[0]
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "failed" and info["error"].startswith(f"TrainingError: {message}")
    monkeypatch.undo()
    r = runner.invoke(app, ["--threads", "1", "search", "--resume", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "run.json").read_text())["status"] == "finished" and (out / "metrics.json").exists()
    return out


def test_the_helper_names_phase_and_step_and_passes_finite_losses():
    assert check_finite_loss(torch.tensor(0.5), "supernet", "epoch 1, batch 1") == 0.5
    with pytest.raises(TrainingError, match=r"^darts: the training loss became inf at step 7; lower strategy.lr\?$"):
        check_finite_loss(torch.tensor(float("inf")), "darts", 7, "lower strategy.lr?")
    assert TrainingError.exit_code == 1


def test_one_shot_supernet(tmp_path, monkeypatch, restore_torch_threads):
    nan_loss(monkeypatch, NodeClassificationTask, after=3)
    out = search_fails_then_resumes(tmp_path, monkeypatch, ONE_SHOT,
                                    "supernet: the training loss became nan at epoch 3, batch 1;")
    epochs = [e["epoch"] for e in map(json.loads, (out / "events.jsonl").read_text().splitlines())
              if e["phase"] == "supernet"]
    assert epochs == [1, 2, 3, 4, 5, 6]  # resumed from the epoch-2 checkpoint, nothing repeated


def test_final_training(tmp_path, monkeypatch, restore_torch_threads):
    nan_loss(monkeypatch, NodeClassificationTask, after=2)
    search_fails_then_resumes(tmp_path, monkeypatch, {**FIXED_GCN, "retrain": {"epochs": 3, "patience": 0}},
                              "final training: the training loss became nan at epoch 2, batch 1;")


def test_darts(tmp_path, monkeypatch, restore_torch_threads):
    nan_loss(monkeypatch, ImageClassificationTask, after=3)  # the weight step of epoch 1, step 2
    search_fails_then_resumes(tmp_path, monkeypatch, DARTS,
                              "darts: the training loss became nan at epoch 1, step 2; lower strategy.optim.lr?")


def test_mechanism_prune_fine_tuning(tmp_path, monkeypatch, restore_torch_threads):
    torch.set_num_threads(1)
    nan_loss(monkeypatch, SequenceClassificationTask, caller="train_step")
    recipe = copy.deepcopy(PRUNE)
    with pytest.raises(TrainingError, match=r"^prune: the training loss became nan at fine-tuning step 1 "):
        pipeline.search(recipe, out=tmp_path / "run")
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "failed" and "prune: the training loss became nan" in info["error"]
    monkeypatch.undo()
    run = pipeline.resume(tmp_path / "run")
    assert run.read_json("run.json")["status"] == "finished" and run.exists("metrics.json")
