"""CIFAR-10 from the standard python batches (Krizhevsky, 2009).

Expected files, in ``$ROOT/cifar-10-batches-py/`` (or the folder given as ``path``)::

    data_batch_1 ... data_batch_5, test_batch      required
    batches.meta                                  optional (class names)

Each batch is a pickled dict with ``b"data"`` (a ``(N, 3072)`` ``uint8`` array, rows are
the red, green and blue 32 x 32 planes) and ``b"labels"`` (``N`` integers in ``0..9``).
Pickles are read with an unpickler that only accepts plain containers and NumPy arrays, so a
malicious file cannot run code. Nothing is downloaded.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import DataError
from attnas.data.image_dataset import ImageDataset
from attnas.data.root import require_files
from attnas.data.safe_pickle import NUMPY_ARRAYS, restricted_load
from attnas.registry import register_dataset

FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def read_batch(path: Path) -> dict:
    """Read one pickled batch into a dict with ``str`` keys.

    Raises:
        DataError: When the file is not a readable pickle of a dict.
    """
    try:
        obj = restricted_load(path, NUMPY_ARRAYS, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, KeyError,
            IndexError, OSError) as exc:
        raise DataError(f"cifar10: {path} is not a CIFAR-10 python batch ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"cifar10: {path} holds a {type(obj).__name__}, expected a dict")
    return {(k.decode("latin1") if isinstance(k, bytes) else str(k)): v for k, v in obj.items()}


def _images_labels(path: Path) -> tuple[np.ndarray, np.ndarray]:
    batch = read_batch(path)
    for key in ("data", "labels"):
        if key not in batch:
            raise DataError(f"cifar10: {path} has no '{key}' entry (keys: {', '.join(sorted(batch))})")
    data = np.asarray(batch["data"])
    labels = np.asarray(batch["labels"])
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(f"cifar10: {path}: 'data' must have shape (N, 3072), got {data.shape}")
    if data.dtype != np.uint8:
        if not np.issubdtype(data.dtype, np.integer) or data.min() < 0 or data.max() > 255:
            raise DataError(f"cifar10: {path}: 'data' must hold bytes 0..255, got dtype {data.dtype}")
        data = data.astype(np.uint8)
    if labels.ndim != 1 or labels.shape[0] != data.shape[0]:
        raise DataError(f"cifar10: {path}: {data.shape[0]} images but {labels.size} labels")
    if not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"cifar10: {path}: labels must be integers, got dtype {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        bad = labels.min() if labels.min() < 0 else labels.max()
        raise DataError(f"cifar10: {path}: label {bad} out of range 0..9")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _class_names(folder: Path) -> tuple[str, ...]:
    meta = folder / "batches.meta"
    if not meta.exists():
        return CLASSES
    names = read_batch(meta).get("label_names")
    if not isinstance(names, (list, tuple)) or len(names) != 10:
        return CLASSES
    return tuple(n.decode("latin1") if isinstance(n, bytes) else str(n) for n in names)


def load_cifar10(folder: Path) -> ImageDataset:
    """Load the CIFAR-10 python batches in ``folder``.

    Raises:
        DataError: Naming any missing file, or the file and entry that is malformed.
    """
    folder = Path(folder)
    require_files(folder, (*TRAIN_FILES, TEST_FILE), "cifar10")
    parts = [_images_labels(folder / name) for name in TRAIN_FILES]
    test_x, test_y = _images_labels(folder / TEST_FILE)
    return ImageDataset(
        name="cifar10",
        train_x=torch.from_numpy(np.concatenate([p[0] for p in parts])),
        train_y=torch.from_numpy(np.concatenate([p[1] for p in parts])),
        test_x=torch.from_numpy(np.ascontiguousarray(test_x)),
        test_y=torch.from_numpy(test_y),
        classes=_class_names(folder),
        flip=True,
        crop_padding=4,
    )


@register_dataset("cifar10", modality="image")
def cifar10(root: Path, path: str | None = None, image_size: int | None = None) -> ImageDataset:
    """CIFAR-10 (python batches in $ROOT/cifar-10-batches-py)."""
    return load_cifar10(Path(path) if path else Path(root) / FOLDER)
