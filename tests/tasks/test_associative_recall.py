"""The ``mqar`` task: registration, per-token batches, a loss and an accuracy over the query positions only."""

from __future__ import annotations

import pytest
import torch

from attnas import registry
from attnas.config import from_mapping, load_config
from attnas.core.errors import ConfigError
from attnas.data.mqar import IGNORE
from attnas.runs.build import build_space
from attnas.tasks.associative_recall import MQARTask, MQARTaskConfig

OPTIONS = {"vocab_size": 32, "seq_len": 32, "num_pairs": 4, "train_size": 40, "val_size": 24, "test_size": 24,
           "batch_size": 16}


@pytest.fixture(scope="module")
def task():
    return MQARTask(from_mapping(MQARTaskConfig, OPTIONS, "task"))


def test_registered_with_per_token_info(task):
    assert registry.get("task", "mqar") is MQARTask
    info = task.info
    assert info.kind == "sequence" and info.num_classes == info.in_dim == 32
    assert info.extra["per_token"] and info.extra["max_len"] == 32
    assert task.size("train") == 40 and task.size("test") == 24
    with pytest.raises(ConfigError, match="unknown split 'dev'"):
        task.size("dev")


def test_batches_cover_the_split_with_labels_at_queries_only(task):
    seen = 0
    for batch in task.batches("val"):
        assert batch["tokens"].shape == batch["y"].shape == batch["mask"].shape
        assert batch["mask"].all() and ((batch["y"] != IGNORE).sum(1) == 4).all()
        seen += batch["tokens"].shape[0]
    assert seen == 24


def _oracle(batch, vocab=32, wrong_elsewhere=True):
    """Logits that are right at every query and (optionally) wrong at every other position."""
    y = batch["y"]
    target = torch.where(y == IGNORE, torch.zeros_like(y) if wrong_elsewhere else y.clamp(min=0), y)
    return torch.nn.functional.one_hot(target, vocab).float() * 20


def test_accuracy_and_loss_count_only_the_query_positions(task):
    assert task.evaluate(_oracle, "test") == 1.0  # wrong at all non-query positions, still perfect

    def half_wrong(batch):
        out = _oracle(batch)
        rows, cols = torch.nonzero(batch["y"] != IGNORE, as_tuple=True)
        first = torch.ones_like(rows, dtype=torch.bool)
        first[1:] = rows[1:] != rows[:-1]  # the first query of each row answers 0
        out[rows[first], cols[first]] = torch.nn.functional.one_hot(torch.tensor(0), 32).float() * 20
        return out

    assert task.evaluate(half_wrong, "test") == pytest.approx(0.75)
    batch = next(task.batches("train"))
    right = task.loss(_oracle(batch), batch)
    assert right.item() < 1e-3  # the non-query positions, all wrong, add nothing
    noisy = _oracle(batch)
    noisy[batch["y"] == IGNORE] = torch.randn_like(noisy[batch["y"] == IGNORE])
    assert task.loss(noisy, batch).item() == pytest.approx(right.item())
    with pytest.raises(Exception, match="per-token logits"):
        task.count_correct(torch.zeros(16, 32), batch)


def test_the_mechanism_space_builds_a_per_token_model_and_supernet(task):
    config = load_config("mechanism-mqar-quick", ["task.seq_len=32", "task.train_size=40", "task.val_size=24",
                                                  "task.test_size=24", "space.dim=16", "space.ffn_dim=16"])
    space = build_space(config)
    batch = next(task.batches("val"))
    model = space.build(space.arch({"mechanism": "local"}), task)
    assert model(batch).shape == (16, 32, 32)
    supernet = space.supernet(task, mode="heterogeneous")
    out = supernet(batch)
    assert out.shape == (16, 32, 32) and torch.isfinite(task.loss(out, batch))


def test_shipped_recipes_load_with_a_two_layer_supernet():
    recipes = [("mechanism-mqar-quick", "homogeneous"), ("dartformer-mqar-quick", "nas-one-shot")]
    for name, mode in recipes + [(n.replace("-quick", "-hard-quick"), m) for n, m in recipes]:
        config = load_config(name)
        assert config.task.name == "mqar" and config.strategy.options.mode == mode
        assert config.space.options.supernet_depth == 2


def test_the_mechanism_search_scores_blocks_by_query_accuracy(tmp_path):
    from attnas import pipeline

    recipe = {
        "name": "tiny-mqar", "seed": 0,
        "task": {"name": "mqar", **OPTIONS},
        "space": {"name": "attention-mechanisms", "candidates": ["softmax", "local"], "dim": 16, "depth": 1,
                  "heads": 2, "ffn_dim": 16, "supernet_depth": 2, "mechanism_options": {"local": {"window": 4}}},
        "strategy": {"name": "mechanism-search", "supernet": {"epochs": 1, "patience": 0, "batch_size": 16}},
        "retrain": {"epochs": 1, "patience": 0, "batch_size": 16},
    }
    seen = []
    original = MQARTask.count_correct

    def spy(output, batch):
        seen.append(output.shape)
        return original(output, batch)

    MQARTask.count_correct = staticmethod(spy)
    try:
        run = pipeline.search(recipe, out=tmp_path / "run")
    finally:
        MQARTask.count_correct = staticmethod(original)
    assert seen and all(len(s) == 3 for s in seen)  # scoring counted per-token outputs at the queries
    import json

    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {"drop_score_softmax", "drop_score_local"} <= set(metrics) and 0 <= metrics["test_accuracy"] <= 1
    assert run is not None
