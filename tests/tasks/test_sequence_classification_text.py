"""Byte- and word-level text through the sequence-classification task and the mechanism space."""

from __future__ import annotations

import pytest
import torch

from attnas.config import from_mapping
from attnas.core.errors import ConfigError
from attnas.spaces.attention_mechanisms import AttentionMechanismSpace, AttentionMechanismsConfig
from attnas.tasks.sequence_classification import SequenceClassificationConfig, SequenceClassificationTask


def csv_task(tmp_path, level="bytes", **text):
    rows = ["text,label"] + [f"{'good fun film' if i % 2 else 'dull bad plot'} number {i},{i % 2}" for i in range(40)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    opts = {"dataset": "csv", "batch_size": 8,
            "text": {"level": level, "max_len": 24, "csv": {"path": str(tmp_path / "d.csv")}, **text}}
    return SequenceClassificationTask(from_mapping(SequenceClassificationConfig, opts, "task"))


@pytest.mark.parametrize("level", ["bytes", "words"])
def test_csv_text_batches_feed_a_mechanism_encoder(tmp_path, level):
    task = csv_task(tmp_path, level)
    info = task.info
    assert info.kind == "sequence" and info.num_classes == 2 and info.extra["max_len"] == 24
    assert info.extra["dataset"] == f"csv-{level}"
    assert info.extra["vocab_size"] == (257 if level == "bytes" else len(task.data.vocab))
    batch = next(task.batches("train"))
    assert batch["tokens"].shape[1] <= 24 and torch.equal(batch["mask"], batch["tokens"] != 0)
    space = AttentionMechanismSpace(AttentionMechanismsConfig(dim=8, depth=1, heads=2, ffn_dim=16))
    for mech in ("softmax", "longformer"):
        model = space.build(space.arch({"mechanism": mech}), task)
        out = model(batch)
        assert out.shape == (len(batch["y"]), 2)
        task.loss(out, batch).backward()
        assert 0.0 <= task.evaluate(model.eval(), "val") <= 1.0


def test_training_subset_and_unknown_dataset(tmp_path):
    task = csv_task(tmp_path, train_size=10)
    assert task.size("train") == 10 and task.size("val") == 4
    with pytest.raises(ConfigError, match="sequence dataset 'sst3'.*sst2"):
        from_mapping(SequenceClassificationConfig, {"dataset": "sst3"}, "task")
    with pytest.raises(ConfigError, match="sequence dataset 'imdb'"):
        task.with_dataset("imdb")
