"""The sequence-classification task on generated ListOps: config, batches, loss and metric."""

from __future__ import annotations

import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ConfigError
from attnas.tasks.sequence_classification import SequenceClassificationConfig, SequenceClassificationTask

OPTIONS = {"dataset": "listops", "batch_size": 16,
           "listops": {"min_length": 8, "max_length": 40, "train_size": 50, "val_size": 20, "test_size": 20}}


@pytest.fixture(scope="module")
def task():
    return SequenceClassificationTask(from_mapping(SequenceClassificationConfig, OPTIONS, "task"))


def test_registered_and_validated_from_a_recipe_mapping():
    assert registry.get("task", "sequence-classification") is SequenceClassificationTask
    with pytest.raises(ConfigError, match=r"task.listops.min_lenght: unknown key \(did you mean 'min_length'\?\)"):
        from_mapping(SequenceClassificationConfig, {"listops": {"min_lenght": 3}}, "task")
    with pytest.raises(ConfigError, match="sequence dataset 'imbd'"):
        from_mapping(SequenceClassificationConfig, {"dataset": "imbd"}, "task")
    with pytest.raises(ConfigError, match="batch_size"):
        from_mapping(SequenceClassificationConfig, {"batch_size": 0}, "task")


def test_info_describes_vocabulary_and_bound(task):
    info = task.info
    assert info.kind == "sequence" and info.num_classes == 10
    assert info.in_dim == info.extra["vocab_size"] == 16
    assert info.extra["max_len"] == 39 and info.extra["pad_id"] == 0


def test_batches_are_padded_to_the_longest_sequence_with_matching_masks(task):
    seqs, labels = task.data.splits["val"]
    seen = 0
    for batch in task.batches("val", batch_size=8):
        b, width = batch["tokens"].shape
        lengths = batch["mask"].sum(1)
        assert width == int(lengths.max())
        for row in range(b):
            n = int(lengths[row])
            assert batch["tokens"][row, :n].tolist() == seqs[seen + row]
            assert (batch["tokens"][row, n:] == 0).all() and batch["mask"][row, :n].all()
        assert batch["y"].tolist() == labels[seen : seen + b]
        seen += b
    assert seen == 20 == task.size("val")


def test_shuffle_is_reproducible_with_a_generator(task):
    def order(seed):
        g = torch.Generator().manual_seed(seed)
        return [batch["y"].tolist() for batch in task.batches("train", shuffle=True, generator=g)]

    assert order(0) == order(0) and order(0) != order(1)
    assert sorted(sum(order(0), [])) == sorted(task.data.splits["train"][1])


def test_evaluate_is_accuracy_and_loss_is_cross_entropy(task):
    labels = torch.tensor(task.data.splits["test"][1])
    oracle = lambda batch: torch.nn.functional.one_hot(batch["y"], 10).float()  # noqa: E731
    constant = lambda batch: torch.nn.functional.one_hot(torch.full_like(batch["y"], 9), 10).float()  # noqa: E731
    assert task.evaluate(oracle, "test") == 1.0
    assert task.evaluate(constant, "test") == pytest.approx(float((labels == 9).float().mean()))
    batch = next(task.batches("train"))
    logits = torch.randn(batch["y"].shape[0], 10)
    torch.testing.assert_close(task.loss(logits, batch), torch.nn.functional.cross_entropy(logits, batch["y"]))


def test_unknown_split_is_named(task):
    with pytest.raises(ConfigError, match="unknown split 'dev'"):
        next(task.batches("dev"))


def test_to_keeps_batches_on_the_device(task):
    task.to("cpu")
    assert next(task.batches("val"))["tokens"].device.type == "cpu"
