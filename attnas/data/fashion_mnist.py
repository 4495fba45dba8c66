"""Fashion-MNIST from its gzipped IDX files (Xiao, Rasul & Vollgraf, 2017).

Expected files, in ``$ROOT/fashion-mnist/`` (or the folder given as ``path``)::

    train-images-idx3-ubyte.gz   train-labels-idx1-ubyte.gz
    t10k-images-idx3-ubyte.gz    t10k-labels-idx1-ubyte.gz

IDX: a big-endian header (two zero bytes, a type code -- ``0x08`` for unsigned bytes -- and
the number of dimensions, then each dimension as a 32-bit integer) followed by the data.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import DataError
from attnas.data.image_dataset import ImageDataset
from attnas.data.root import require_files
from attnas.registry import register_dataset

FOLDER = "fashion-mnist"
FILES = {
    "train_x": "train-images-idx3-ubyte.gz",
    "train_y": "train-labels-idx1-ubyte.gz",
    "test_x": "t10k-images-idx3-ubyte.gz",
    "test_y": "t10k-labels-idx1-ubyte.gz",
}
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """Read a gzipped IDX file of unsigned bytes with ``ndim`` dimensions.

    Raises:
        DataError: Naming the file when it is not gzip, has a wrong header or is truncated.
    """
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"fashion-mnist: cannot read {path}: {exc}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DataError(f"fashion-mnist: {path} is not an IDX file (bad magic number)")
    if raw[2] != 0x08:
        raise DataError(f"fashion-mnist: {path}: data type 0x{raw[2]:02x}, expected unsigned bytes (0x08)")
    if raw[3] != ndim:
        raise DataError(f"fashion-mnist: {path}: {raw[3]} dimensions, expected {ndim}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"fashion-mnist: {path}: truncated header")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(dims))
    if len(raw) - header != expected:
        raise DataError(f"fashion-mnist: {path}: header says {dims} ({expected} bytes) but "
                        f"{len(raw) - header} bytes follow")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def load_fashion_mnist(folder: Path) -> ImageDataset:
    """Load the four Fashion-MNIST files in ``folder`` (see the module docstring)."""
    folder = Path(folder)
    require_files(folder, FILES.values(), "fashion-mnist")
    arrays = {}
    for key, name in FILES.items():
        arr = read_idx(folder / name, 3 if key.endswith("x") else 1)
        arrays[key] = torch.from_numpy(arr.copy())
    return ImageDataset(
        name="fashion-mnist",
        train_x=arrays["train_x"][:, None],
        train_y=arrays["train_y"].long(),
        test_x=arrays["test_x"][:, None],
        test_y=arrays["test_y"].long(),
        classes=CLASSES,
        flip=True,
        crop_padding=4,
    )


@register_dataset("fashion-mnist", modality="image")
def fashion_mnist(root: Path, path: str | None = None, image_size: int | None = None) -> ImageDataset:
    """Fashion-MNIST (IDX files in $ROOT/fashion-mnist)."""
    return load_fashion_mnist(Path(path) if path else Path(root) / FOLDER)
