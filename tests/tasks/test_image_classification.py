"""The image classification task: splits, batches, augmentation, metric."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ConfigError
from attnas.tasks.image_classification import ImageClassificationConfig, ImageClassificationTask


def digits_task(**kw) -> ImageClassificationTask:
    return ImageClassificationTask(ImageClassificationConfig(dataset="digits", **kw))


def test_registered():
    assert registry.get("task", "image-classification") is ImageClassificationTask


def test_splits_partition_the_training_images():
    task = digits_task(val_fraction=0.2)
    assert task.size("train") + task.size("val") == 1437 and task.size("test") == 360
    a, b, train = (set(task._index[s].tolist()) for s in ("train_a", "train_b", "train"))
    assert not a & b and a | b == train and abs(len(a) - len(b)) <= 1
    assert not train & set(task._index["val"].tolist())
    info = task.info
    assert (info.kind, info.in_dim, info.num_classes, info.extra["image_size"]) == ("image", 1, 10, [8, 8])


def test_batches_are_normalised_and_cover_the_split():
    task = digits_task(augment=False, batch_size=100)
    xs, ys = zip(*task.batches("train"))
    x = torch.cat(xs)
    assert x.shape == (task.size("train"), 1, 8, 8) and x.dtype == torch.float32
    assert abs(float(x.mean())) < 1e-3 and abs(float(x.std()) - 1) < 1e-2
    assert torch.cat(ys).dtype == torch.int64 and len(xs[0]) == 100


def test_augmentation_only_on_training_splits():
    task = digits_task(resize=16)
    g = torch.Generator().manual_seed(0)
    aug = next(task.batches("train_a", generator=g))[0]
    plain = next(task.batches("train_a", augment=False))[0]
    assert aug.shape == plain.shape == (128, 1, 16, 16)
    assert not torch.equal(aug, plain)
    v1, v2 = next(task.batches("val"))[0], next(task.batches("val"))[0]
    assert torch.equal(v1, v2)
    assert task.crop_padding == 2 and not task.flip


def test_shuffle_is_seeded():
    task = digits_task()
    y1 = next(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(1)))[1]
    y2 = next(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(1)))[1]
    y3 = next(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(2)))[1]
    assert torch.equal(y1, y2) and not torch.equal(y1, y3)


def test_evaluate_and_loss():
    task = digits_task(test_subset=50)
    assert task.size("test") == 50
    labels = task._y["test"]

    def perfect(batch):
        return torch.nn.functional.one_hot(batch[1], 10).float()

    assert task.evaluate(perfect, "test") == 1.0
    majority = int(np.bincount(labels.numpy()).argmax())
    share = float((labels == majority).float().mean())
    assert task.evaluate(lambda b: torch.nn.functional.one_hot(torch.full_like(b[1], majority), 10).float(),
                         "test") == pytest.approx(share)
    batch = next(task.batches("test"))
    assert float(task.loss(torch.zeros(len(batch[1]), 10), batch)) == pytest.approx(np.log(10), rel=1e-5)


def test_errors():
    with pytest.raises(ConfigError, match="unknown image dataset 'digit'.*did you mean 'digits'"):
        ImageClassificationTask(ImageClassificationConfig(dataset="digit"))
    with pytest.raises(ConfigError, match="unknown split 'valid'"):
        next(digits_task().batches("valid"))
    with pytest.raises(ConfigError, match="split 'val' is empty"):
        next(digits_task(val_fraction=0.0).batches("val"))
    with pytest.raises(ConfigError, match="val_fraction"):
        from_mapping(ImageClassificationConfig, {"val_fraction": 1.5})


def test_cifar_files_through_the_task(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, (6, 3072), dtype=np.uint8),
                         b"labels": rng.integers(0, 10, 6).tolist()}, f, protocol=2)
    task = ImageClassificationTask(ImageClassificationConfig(dataset="cifar10", val_fraction=0.2, batch_size=8),
                                   data_root=tmp_path)
    assert task.info.in_dim == 3 and task.size("train") == 24 and task.size("test") == 6
    x, y = next(task.batches("train_b"))
    assert x.shape == (8, 3, 32, 32) and task.flip and task.crop_padding == 4
    other = task.with_dataset("digits")
    assert other.info.in_dim == 1


def test_fashion_mnist_subset(data_root):
    task = ImageClassificationTask(ImageClassificationConfig(dataset="fashion-mnist", train_subset=1000,
                                                             test_subset=200), data_root=data_root)
    assert task.size("train") == 900 and task.size("test") == 200
    x, y = next(task.batches("train_a", batch_size=16))
    assert x.shape == (16, 1, 28, 28) and int(y.max()) < 10
