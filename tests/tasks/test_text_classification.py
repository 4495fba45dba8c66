"""The text-classification task on real SST + GloVe, and on a CSV written here."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ConfigError
from attnas.data.text_csv import CsvOptions
from attnas.models.text_encoder import MaskedPoolingHead, TextStem
from attnas.tasks.text_classification import TextClassificationConfig, TextClassificationTask

THE = [0.418, 0.24968, -0.41242, 0.1217, 0.34527]


@pytest.fixture(scope="module")
def sst5():
    """The SST-5 task, built once for the module (skips without the real data)."""
    root = os.environ.get("ATTNAS_DATA")
    if not root or not (Path(root) / "sst").is_dir():
        pytest.skip("real data not available (set ATTNAS_DATA)")
    return TextClassificationTask(TextClassificationConfig(dataset="sst5"), root)


def test_registered():
    assert registry.get("task", "text-classification") is TextClassificationTask


def test_info_and_glove_rows(sst5):
    info = sst5.info
    assert (info.kind, info.in_dim, info.num_classes) == ("text", 50, 5)
    assert info.extra["split_sizes"] == {"train": 8544, "val": 1101, "test": 2210}
    assert info.extra["vocab_size"] == len(sst5.vocab) > 10000
    E = info.extra["embeddings"]()
    assert E.shape == (len(sst5.vocab), 50)
    np.testing.assert_allclose(E[sst5.vocab.stoi["the"], :5].numpy(), THE, rtol=1e-6)
    assert torch.all(E[0] == 0)
    E[2] += 1  # the accessor hands out copies
    assert not torch.equal(E[2], info.extra["embeddings"]()[2])


def test_batches_cover_split_once_with_consistent_masks(sst5):
    g = torch.Generator().manual_seed(0)
    seen, total = [], 0
    for batch in sst5.batches("val", shuffle=True, generator=g, batch_size=256):
        B, L = batch.tokens.shape
        assert batch.mask.shape == (B, L) and batch.lengths.shape == batch.y.shape == (B,)
        assert L == int(batch.lengths.max()) <= 64  # padded to the batch's longest
        assert torch.equal(batch.mask, torch.arange(L)[None] < batch.lengths[:, None])
        assert torch.all(batch.tokens[~batch.mask] == 0) and torch.all(batch.tokens[batch.mask] != 0)
        assert torch.equal(batch.lengths_cpu, batch.lengths.cpu())
        seen.append(batch.y)
        total += B
    assert total == 1101
    assert torch.bincount(torch.cat(seen), minlength=5).tolist() == [139, 289, 229, 279, 165]
    order = [b.y for b in sst5.batches("val", shuffle=True, generator=torch.Generator().manual_seed(0),
                                        batch_size=256)]
    assert all(torch.equal(a, b) for a, b in zip(seen, order))  # seeded shuffle is reproducible


def test_evaluate_constant_predictor_is_class_frequency(sst5):
    def predict_neutral(batch):
        return torch.nn.functional.one_hot(torch.full_like(batch.y, 2), 5).float()

    assert sst5.evaluate(predict_neutral, "val") == pytest.approx(229 / 1101)
    assert sst5.evaluate(predict_neutral, "test", batch_size=1000) == pytest.approx(389 / 2210)


def test_loss_and_a_training_step_with_stem_and_head(sst5):
    torch.manual_seed(0)
    stem, head = TextStem.from_task(sst5, 16, dropout=0.0), MaskedPoolingHead(16, 5)
    params = list(stem.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.5)
    batch = next(sst5.batches("train", batch_size=32))
    loss0 = sst5.loss(head(*stem(batch)), batch)
    torch.testing.assert_close(loss0, torch.nn.functional.cross_entropy(head(*stem(batch)), batch.y))
    for _ in range(3):
        opt.zero_grad()
        sst5.loss(head(*stem(batch)), batch).backward()
        opt.step()
    assert sst5.loss(head(*stem(batch)), batch) < loss0


def test_pad_to_max_len_and_truncation(data_root):
    task = TextClassificationTask(TextClassificationConfig(max_len=8, pad_to="max_len", glove="none",
                                                           embedding_dim=4), data_root)
    batch = next(task.batches("train", batch_size=16))
    assert batch.tokens.shape == (16, 8) and int(batch.lengths.max()) <= 8
    assert task.info.in_dim == 4 and task.info.extra["glove_words"] == 0


def test_with_dataset_sst2(sst5):
    sst2 = sst5.with_dataset("sst2")
    assert sst2.info.num_classes == 2
    assert sst2.info.extra["split_sizes"] == {"train": 6920, "val": 872, "test": 1821}
    assert sst2.options.max_len == sst5.options.max_len
    with pytest.raises(ConfigError, match=r"unknown text dataset 'sst3'.*valid choices: csv, sst2, sst5"):
        sst5.with_dataset("sst3")


def test_train_plus_glove_vocab_adds_only_known_words(sst5, data_root):
    wide = TextClassificationTask(TextClassificationConfig(vocab="train+glove"), data_root)
    added = wide.vocab.itos[len(sst5.vocab):]
    assert wide.vocab.itos[: len(sst5.vocab)] == sst5.vocab.itos and added
    assert set(added) <= set(wide.glove.words)
    assert wide.vocab.coverage(wide.dataset["test"].tokens) > sst5.vocab.coverage(sst5.dataset["test"].tokens)


def test_csv_task_with_own_glove_file(tmp_path):
    rows = ["text,label"] + [f"{'good fine' if i % 2 else 'bad awful'} movie {i},{'pos' if i % 2 else 'neg'}"
                             for i in range(40)]
    (tmp_path / "reviews.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "vec.txt").write_text("good 1 0 0\nbad 0 1 0\nmovie 0 0 1\n")
    opts = TextClassificationConfig(dataset="csv", glove=str(tmp_path / "vec.txt"),
                                     csv=CsvOptions(path=str(tmp_path / "reviews.csv")))
    task = TextClassificationTask(opts, tmp_path)
    info = task.info
    assert (info.in_dim, info.num_classes, info.extra["label_names"]) == (3, 2, ("neg", "pos"))
    assert sum(task.num_examples(s) for s in ("train", "val", "test")) == 40
    E = info.extra["embeddings"]()
    torch.testing.assert_close(E[task.vocab.stoi["good"]], torch.tensor([1.0, 0, 0]))


def test_config_from_recipe_mapping_and_errors():
    cfg = from_mapping(TextClassificationConfig, {"dataset": "csv", "csv": {"path": "a.tsv", "labels": ["x"]}},
                       "task")
    assert cfg.csv.path == "a.tsv" and cfg.csv.labels == ("x",)
    with pytest.raises(ConfigError, match=r"task.max_lenn: unknown key \(did you mean 'max_len'\?\)"):
        from_mapping(TextClassificationConfig, {"max_lenn": 3}, "task")
    with pytest.raises(ConfigError, match="max_len: must be >= 1"):
        TextClassificationConfig(max_len=0)
    with pytest.raises(ConfigError, match="needs GloVe"):
        TextClassificationConfig(vocab="train+glove", glove="none")


def test_unknown_split(sst5):
    with pytest.raises(ConfigError, match="unknown split 'dev'.*valid choices: test, train, val"):
        next(sst5.batches("dev"))


def test_bucketed_shuffle_covers_every_example_once_with_less_padding(data_root):
    task = TextClassificationTask(TextClassificationConfig(dataset="sst5", bucket=4), data_root)
    plain = TextClassificationTask(TextClassificationConfig(dataset="sst5"), data_root)

    def run(t, seed):
        g = torch.Generator().manual_seed(seed)
        batches = list(t.batches("train", shuffle=True, generator=g))
        return batches, sum(b.tokens.numel() for b in batches)

    batches, padded = run(task, 0)
    _, padded_plain = run(plain, 0)
    assert sorted(len(b) for b in batches)[-1] == 128 and sum(len(b) for b in batches) == 8544
    ids = torch.cat([b.tokens[:, 0] * 1000 + b.lengths for b in batches])  # a cheap fingerprint per example
    ref = task._encoded["train"]
    expect = ref.ids[:, 0] * 1000 + ref.lengths
    assert torch.equal(ids.sort().values, expect.sort().values)
    assert padded < 0.7 * padded_plain  # similar lengths share a batch
    again, _ = run(task, 0)
    other, _ = run(task, 1)
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(batches, again))  # seeded
    assert not all(torch.equal(a.tokens, b.tokens) for a, b in zip(batches, other))
    with pytest.raises(ConfigError, match="bucket"):
        TextClassificationConfig(bucket=-1)
