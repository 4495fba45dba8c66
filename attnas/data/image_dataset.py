"""An image classification dataset held in memory, and the checks every image loader runs.

Loaders (:mod:`attnas.data.cifar10`, :mod:`attnas.data.fashion_mnist`,
:mod:`attnas.data.digits`, :mod:`attnas.data.image_folder`) return an :class:`ImageDataset`:
``uint8`` image tensors ``(N, C, H, W)`` and ``int64`` labels for a training and a test
split, plus the facts the task needs to augment them (whether a horizontal flip keeps the
label, how much padding the random crop uses). Each loader is registered with
``register_dataset(name, modality="image")`` as a function ``load(root, path=None,
image_size=None) -> ImageDataset``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnas.core.errors import DataError


@dataclass
class ImageDataset:
    """Training and test images of a classification dataset.

    Attributes:
        name: The dataset's name, for messages.
        train_x: ``uint8`` images ``(N, C, H, W)``.
        train_y: ``int64`` labels ``(N,)`` in ``[0, len(classes))``.
        test_x: ``uint8`` images ``(M, C, H, W)``.
        test_y: ``int64`` labels ``(M,)``.
        classes: Class names, index = label.
        flip: Whether a horizontal flip keeps an image's label (not for digits).
        crop_padding: Padding of the standard pad-and-crop augmentation.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: tuple[str, ...]
    flip: bool = True
    crop_padding: int = 4

    def __post_init__(self) -> None:
        self.classes = tuple(str(c) for c in self.classes)
        if not self.classes:
            raise DataError(f"{self.name}: no classes")
        for split in ("train", "test"):
            x, y = getattr(self, f"{split}_x"), getattr(self, f"{split}_y")
            check_images(x, y, len(self.classes), f"{self.name} ({split} split)")
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise DataError(f"{self.name}: training images are {tuple(self.train_x.shape[1:])} (C, H, W) but test "
                            f"images are {tuple(self.test_x.shape[1:])}")
        if self.crop_padding < 0:
            raise DataError(f"{self.name}: crop_padding must be >= 0, got {self.crop_padding}")

    @property
    def channels(self) -> int:
        """Image channels ``C``."""
        return int(self.train_x.shape[1])

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)``."""
        return int(self.train_x.shape[2]), int(self.train_x.shape[3])

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)


def check_images(x: torch.Tensor, y: torch.Tensor, num_classes: int, what: str) -> None:
    """Check one split: ``uint8`` ``(N, C, H, W)`` images, ``N`` ``int64`` labels in range.

    Raises:
        DataError: Naming ``what`` and the problem.
    """
    if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8:
        raise DataError(f"{what}: images must be a uint8 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() != 4:
        raise DataError(f"{what}: images must have shape (N, C, H, W), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise DataError(f"{what}: no images")
    if x.shape[1] not in (1, 3, 4) or x.shape[2] < 1 or x.shape[3] < 1:
        raise DataError(f"{what}: images must have 1, 3 or 4 channels, got shape {tuple(x.shape)}")
    if not isinstance(y, torch.Tensor) or y.dtype != torch.int64 or y.dim() != 1:
        raise DataError(f"{what}: labels must be a 1-D int64 tensor, got "
                        f"{getattr(y, 'dtype', type(y).__name__)} of shape {tuple(getattr(y, 'shape', ()))}")
    if y.shape[0] != x.shape[0]:
        raise DataError(f"{what}: {x.shape[0]} images but {y.shape[0]} labels")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= num_classes:
        bad = lo if lo < 0 else hi
        raise DataError(f"{what}: label {bad} out of range 0..{num_classes - 1}")
