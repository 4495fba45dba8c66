"""scikit-learn's bundled hand-written digits: 1,797 grey 8 x 8 images, 10 classes.

They ship with scikit-learn, so nothing needs a data root. There is no official test split:
a fixed, stratified 20 % (360 images, seed 0) is held out as the test split. Pixel values
0..16 are scaled to 0..255. Horizontal flips would change a digit's meaning, so they are off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import ConfigError
from attnas.data.image_dataset import ImageDataset
from attnas.registry import register_dataset

TEST_FRACTION = 0.2
SEED = 0


def load_digits_dataset() -> ImageDataset:
    """The digits with a fixed stratified train/test split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    labels = bunch.target.astype(np.int64)
    tr, te = train_test_split(np.arange(len(labels)), test_size=TEST_FRACTION, random_state=SEED, stratify=labels)
    return ImageDataset(
        name="digits",
        train_x=torch.from_numpy(images[tr]),
        train_y=torch.from_numpy(labels[tr]),
        test_x=torch.from_numpy(images[te]),
        test_y=torch.from_numpy(labels[te]),
        classes=tuple(str(i) for i in range(10)),
        flip=False,
        crop_padding=1,
    )


@register_dataset("digits", modality="image")
def digits(root: Path, path: str | None = None, image_size: int | None = None) -> ImageDataset:
    """scikit-learn's 8x8 digits (bundled; no download)."""
    if path:
        raise ConfigError("digits: the dataset ships with scikit-learn and takes no path")
    return load_digits_dataset()
