"""Image classification: CIFAR-10, Fashion-MNIST, scikit-learn digits or your own images.

Splits:

* ``train`` -- the training images minus a seeded validation share (``val_fraction``);
* ``val`` -- that share;
* ``train_a`` / ``train_b`` -- ``train`` cut at random into two disjoint halves, for
  first-order DARTS (weights on ``train_a``, architecture on ``train_b``; AutoLA Sec. 3.3);
* ``test`` -- the dataset's test split.

Batches are ``(x, y)`` on the task's device: ``x`` float ``(B, C, H, W)`` (resized when
``resize`` is set, augmented on the training splits, normalised per channel with the
training split's mean and standard deviation), ``y`` int64 labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F

from attnas import registry
from attnas.config import CheckedConfig, Fraction, NonNegativeInt, PositiveInt, Seed
from attnas.core.errors import ConfigError
from attnas.data.augment import random_crop, random_flip
from attnas.data.image_dataset import ImageDataset
from attnas.data.root import resolve_data_root
from attnas.data.splits import halves, holdout
from attnas.registry import register_task
from attnas.tasks.base import Task, TaskInfo

SPLITS = ("train", "val", "test", "train_a", "train_b")
TRAIN_SPLITS = ("train", "train_a", "train_b")


@dataclass(frozen=True)
class ImageClassificationConfig(CheckedConfig):
    """Options of the image classification task.

    Attributes:
        dataset: A registered image dataset (``cifar10``, ``fashion-mnist``, ``digits``,
            ``image-folder``).
        path: The dataset's folder, overriding ``$ROOT/<dataset folder>``; required for
            ``image-folder``.
        val_fraction: Share of the training images held out as ``val`` (seeded).
        batch_size: Training batch size.
        eval_batch_size: Batch size of evaluation.
        augment: Augment training batches (pad-and-crop, and flips where they apply).
        crop_padding: Padding of the random crop; null: the dataset's default (4 for CIFAR-10
            and Fashion-MNIST, 1 for the 8x8 digits); 0 disables cropping.
        flip: Random horizontal flips; null: where they keep the label (not for digits).
        normalize: Subtract the per-channel mean and divide by the standard deviation.
        resize: Resize images to ``resize x resize`` (bilinear); null keeps their size.
        train_subset: Use only this many training images (seeded; for quick runs).
        test_subset: Use only this many test images (seeded).
        split_seed: Seed of the subsets, the validation hold-out and the A/B halves.
    """

    dataset: str = "digits"
    path: Optional[str] = None
    val_fraction: Fraction = 0.1
    batch_size: PositiveInt = 128
    eval_batch_size: PositiveInt = 500
    augment: bool = True
    crop_padding: Optional[NonNegativeInt] = None
    flip: Optional[bool] = None
    normalize: bool = True
    resize: Optional[PositiveInt] = None
    train_subset: Optional[PositiveInt] = None
    test_subset: Optional[PositiveInt] = None
    split_seed: Seed = 0


def load_image_dataset(name: str, root: Path, path: str | None = None, image_size: int | None = None) -> ImageDataset:
    """Load the registered image dataset ``name`` (unknown or non-image names raise ``ConfigError``)."""
    image_names = registry.names("dataset", modality="image")
    if name not in image_names:
        from attnas.core.errors import unknown_name

        raise ConfigError(unknown_name("image dataset", name, image_names))
    return registry.get("dataset", name)(root, path=path, image_size=image_size)


def _subset(n: int, size: int | None, seed: int) -> torch.Tensor | None:
    if size is None or size >= n:
        return None
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size].sort().values


def channel_stats(x: torch.Tensor, idx: torch.Tensor, chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and standard deviation of ``x[idx] / 255``, in chunks (float64 sums)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    squares = torch.zeros(x.shape[1], dtype=torch.float64)
    for start in range(0, len(idx), chunk):
        part = x[idx[start: start + chunk]].double().div_(255)
        total += part.sum((0, 2, 3))
        squares += part.square().sum((0, 2, 3))
    n = len(idx) * x.shape[2] * x.shape[3]
    mean = total / n
    std = (squares / n - mean.square()).clamp_min(0).sqrt()
    return mean.float(), std.float().clamp_min(1e-3)


@register_task("image-classification")
class ImageClassificationTask(Task):
    """Classify images into one of the dataset's classes; metric: accuracy."""

    name = "image-classification"
    Config = ImageClassificationConfig
    metric = "accuracy"
    #: The bilevel-split protocol of :mod:`attnas.strategies.darts`: weights on ``train_a``,
    #: architecture weights on ``train_b`` (disjoint halves of ``train``).
    bilevel_splits = ("train_a", "train_b")

    def __init__(self, options: ImageClassificationConfig | None = None, data_root: Path | None = None,
                 dataset: ImageDataset | None = None):
        super().__init__(options, data_root)
        o = self.options
        self.data_root = resolve_data_root(data_root)
        data = dataset if dataset is not None else load_image_dataset(o.dataset, self.data_root, o.path, o.resize)
        self.dataset = data
        train_x, train_y, test_x, test_y = data.train_x, data.train_y, data.test_x, data.test_y
        sub = _subset(len(train_y), o.train_subset, o.split_seed)
        if sub is not None:
            train_x, train_y = train_x[sub], train_y[sub]
        sub = _subset(len(test_y), o.test_subset, o.split_seed + 1)
        if sub is not None:
            test_x, test_y = test_x[sub], test_y[sub]
        self._x = {"train": train_x, "test": test_x}
        self._y = {"train": train_y, "test": test_y}
        train_idx, val_idx = holdout(len(train_y), o.val_fraction, o.split_seed)
        a, b = halves(train_idx, o.split_seed + 2)
        self._index = {"train": train_idx, "val": val_idx, "train_a": a, "train_b": b, "test": None}
        self.crop_padding = data.crop_padding if o.crop_padding is None else o.crop_padding
        self.flip = data.flip if o.flip is None else o.flip
        h, w = data.image_size if o.resize is None else (o.resize, o.resize)
        if o.resize is not None and self.crop_padding and o.crop_padding is None:
            self.crop_padding = max(1, round(self.crop_padding * o.resize / data.image_size[0]))
        self.image_size = (h, w)
        self.mean, self.std = channel_stats(train_x, train_idx)

    # -- facts --------------------------------------------------------------------------------

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(kind="image", in_dim=self.dataset.channels, num_classes=self.dataset.num_classes,
                        extra={"image_size": list(self.image_size), "dataset": self.options.dataset,
                               "classes": list(self.dataset.classes)})

    def size(self, split: str) -> int:
        """Number of examples in ``split``."""
        self._check_split(split)
        idx = self._index[split]
        return len(self._y["test"]) if idx is None else len(idx)

    def _check_split(self, split: str) -> None:
        if split not in SPLITS:
            from attnas.core.errors import unknown_name

            raise ConfigError(unknown_name("split", split, SPLITS))
        if split == "val" and len(self._index["val"]) == 0:
            raise ConfigError("split 'val' is empty: set the task's val_fraction > 0")

    # -- batches ------------------------------------------------------------------------------

    def prepare(self, x: torch.Tensor, augment: bool, generator: torch.Generator | None = None) -> torch.Tensor:
        """``uint8`` images to normalised float images on the device (resized, maybe augmented)."""
        o = self.options
        x = x.to(self.device, non_blocking=True).float().div_(255)
        if o.resize is not None and tuple(x.shape[2:]) != self.image_size:
            x = F.interpolate(x, size=self.image_size, mode="bilinear", align_corners=False,
                              antialias=x.shape[2] > self.image_size[0])
        if augment:
            x = random_crop(x, self.crop_padding, generator)
            if self.flip:
                x = random_flip(x, generator)
        if o.normalize:
            x = (x - self.mean.to(x.device)[:, None, None]) / self.std.to(x.device)[:, None, None]
        return x

    def batches(self, split: str, *, shuffle: bool = False, generator: torch.Generator | None = None,
                batch_size: int | None = None, augment: bool | None = None
                ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Iterate over ``(x, y)`` batches of ``split`` (see the module docstring).

        Args:
            split: ``train``, ``val``, ``test``, ``train_a`` or ``train_b``.
            shuffle: Visit the examples in a random order.
            generator: Source of the order and of the augmentation (default: torch's global RNG).
            batch_size: Batch size (default: ``batch_size`` for training splits,
                ``eval_batch_size`` otherwise).
            augment: Augment; default: on the training splits when the task's ``augment`` is set.
        """
        self._check_split(split)
        source = "test" if split == "test" else "train"
        X, Y = self._x[source], self._y[source]
        idx = self._index[split]
        if idx is None:
            idx = torch.arange(len(Y))
        if shuffle:
            idx = idx[torch.randperm(len(idx), generator=generator)]
        bs = batch_size or (self.options.batch_size if split in TRAIN_SPLITS else self.options.eval_batch_size)
        if augment is None:
            augment = self.options.augment and split in TRAIN_SPLITS
        for start in range(0, len(idx), bs):
            part = idx[start: start + bs]
            yield self.prepare(X[part], augment, generator), Y[part].to(self.device, non_blocking=True)

    def loss(self, output: torch.Tensor, batch: Any) -> torch.Tensor:
        """Cross-entropy of the logits ``output`` against the batch's labels."""
        return F.cross_entropy(output, batch[1])

    @torch.no_grad()
    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        """Accuracy (a fraction in [0, 1]) of ``forward`` on ``split``, without augmentation."""
        correct = total = 0
        for batch in self.batches(split, batch_size=batch_size or self.options.eval_batch_size, augment=False):
            pred = forward(batch).argmax(-1)
            correct += int((pred == batch[1]).sum())
            total += len(batch[1])
        return correct / max(total, 1)

    def with_dataset(self, dataset: str) -> ImageClassificationTask:
        """The same task on another image dataset."""
        opts = dataclasses.replace(self.options, dataset=dataset, path=None)
        return type(self)(opts, self.data_root).to(self.device)
