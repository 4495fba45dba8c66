"""A user's own images, one sub-folder per class.

Two layouts are accepted::

    FOLDER/cat/1.png  FOLDER/dog/2.jpg ...                 (a test split is held out)
    FOLDER/train/cat/1.png ...  FOLDER/test/cat/7.png ...  (given splits)

Class names are the sub-folder names, sorted; labels follow that order. Images are read with
Pillow (``.png .jpg .jpeg .bmp .gif .tif .tiff .webp``) or as NumPy arrays (``.npy``:
``(H, W)``, ``(H, W, C)`` or ``(C, H, W)``, ``uint8`` or floats in ``[0, 1]``). All images
become grey-scale when every one of them is, RGB otherwise. They must share one size unless
``image_size`` is given, in which case each is resized to ``image_size x image_size``.
An image of more pixels than Pillow's ``MAX_IMAGE_PIXELS`` (a decompression bomb) is refused.
Other files (and hidden ones) are ignored.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.data.image_dataset import ImageDataset
from attnas.registry import register_dataset

PIL_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
SUFFIXES = PIL_SUFFIXES | {".npy"}


def _class_files(folder: Path, what: str) -> dict[str, list[Path]]:
    if not folder.is_dir():
        raise DataError(f"{what}: {folder} is not a folder")
    classes = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DataError(f"{what}: {folder} has no class sub-folders (expected {folder}/<class>/<image>)")
    out = {}
    for c in classes:
        files = sorted(p for p in c.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.suffix.lower() in SUFFIXES)
        if not files:
            raise DataError(f"{what}: class folder {c} holds no images ({', '.join(sorted(SUFFIXES))})")
        out[c.name] = files
    return out


def _read_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"image-folder: cannot read {path}: {exc}") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    elif arr.ndim == 3 and arr.shape[0] in (1, 3) and arr.shape[2] not in (1, 3):
        arr = arr.transpose(1, 2, 0)
    if arr.ndim != 3 or arr.shape[2] not in (1, 3):
        raise DataError(f"image-folder: {path}: expected an (H, W), (H, W, C) or (C, H, W) array with 1 or 3 "
                        f"channels, got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return arr
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all() or arr.min() < 0 or arr.max() > 1:
            raise DataError(f"image-folder: {path}: float images must hold values in [0, 1]")
        return np.rint(arr * 255).astype(np.uint8)
    raise DataError(f"image-folder: {path}: unsupported dtype {arr.dtype} (use uint8 or floats in [0, 1])")


def _read_pil(path: Path) -> np.ndarray:
    """An image as ``(H, W, 1)`` (grey modes) or ``(H, W, 3)`` (anything else, as RGB) bytes."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.load()
                mode = "L" if img.mode in ("1", "L", "LA", "I", "I;16", "F") else "RGB"
                arr = np.asarray(img.convert(mode))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise DataError(f"image-folder: {path} is larger than {Image.MAX_IMAGE_PIXELS:,} pixels (Pillow's limit "
                        "against decompression bombs); resize it") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"image-folder: cannot read image {path}: {exc}") from None
    return arr[:, :, None] if arr.ndim == 2 else arr


def _resize(arr: np.ndarray, size: int) -> np.ndarray:
    x = torch.from_numpy(np.array(arr)).permute(2, 0, 1)[None].float()
    x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return x[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def _load(files: list[Path], image_size: int | None) -> list[np.ndarray]:
    arrays = [_read_npy(p) if p.suffix.lower() == ".npy" else _read_pil(p) for p in files]
    grey = all(a.shape[2] == 1 for a in arrays)
    out = []
    for p, a in zip(files, arrays):
        if not grey and a.shape[2] == 1:
            a = np.repeat(a, 3, axis=2)
        if image_size is not None and a.shape[:2] != (image_size, image_size):
            a = _resize(a, image_size)
        out.append(a)
    first = out[0].shape
    for p, a in zip(files, out):
        if a.shape != first:
            raise DataError(f"image-folder: {p} is {a.shape[1]}x{a.shape[0]} but {files[0]} is "
                            f"{first[1]}x{first[0]}; set the task's resize option to give all images one size")
    return out


def _stack(arrays: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(np.stack(arrays).transpose(0, 3, 1, 2).copy())


def load_image_folder(folder: str | Path, image_size: int | None = None, test_fraction: float = 0.2,
                      seed: int = 0) -> ImageDataset:
    """Load a class-per-sub-folder image collection.

    Args:
        folder: The collection (see the module docstring for the layouts).
        image_size: Resize every image to this square size (required when sizes differ).
        test_fraction: Share of each class held out as the test split when the folder has no
            ``train``/``test`` sub-folders.
        seed: Seed of that hold-out.

    Raises:
        DataError: For a missing or empty folder, a class without images, an unreadable image
            or images of different sizes (each named).
    """
    folder = Path(folder)
    if not folder.exists():
        raise DataError(f"image-folder: {folder} does not exist")
    if image_size is not None and image_size < 1:
        raise ConfigError(f"image-folder: image_size must be >= 1, got {image_size}")
    if (folder / "train").is_dir() and (folder / "test").is_dir():
        train = _class_files(folder / "train", "image-folder")
        test = _class_files(folder / "test", "image-folder")
        extra = sorted(set(test) - set(train))
        if extra:
            raise DataError(f"image-folder: test classes {', '.join(extra)} have no training folder in {folder / 'train'}")
        classes = sorted(train)
        splits = {name: [(p, classes.index(c)) for c in sorted(files) for p in files[c]]
                  for name, files in (("train", train), ("test", test))}
    else:
        if not 0 < test_fraction < 1:
            raise ConfigError(f"image-folder: test_fraction must be in (0, 1), got {test_fraction}")
        per_class = _class_files(folder, "image-folder")
        classes = sorted(per_class)
        rng = np.random.default_rng(seed)
        splits = {"train": [], "test": []}
        for label, c in enumerate(classes):
            files = per_class[c]
            if len(files) < 2:
                raise DataError(f"image-folder: class folder {folder / c} needs at least 2 images to hold one out "
                                f"for testing (or use {folder}/train and {folder}/test)")
            order = rng.permutation(len(files))
            n_test = min(len(files) - 1, max(1, round(test_fraction * len(files))))
            splits["test"] += [(files[i], label) for i in order[:n_test]]
            splits["train"] += [(files[i], label) for i in order[n_test:]]
    all_files = [p for s in ("train", "test") for p, _ in splits[s]]
    arrays = _load(all_files, image_size)
    n_train = len(splits["train"])
    labels = {s: torch.tensor([y for _, y in splits[s]], dtype=torch.int64) for s in splits}
    pad = max(1, min(arrays[0].shape[:2]) // 8)
    return ImageDataset(
        name=f"image-folder {folder}",
        train_x=_stack(arrays[:n_train]),
        train_y=labels["train"],
        test_x=_stack(arrays[n_train:]),
        test_y=labels["test"],
        classes=tuple(classes),
        flip=True,
        crop_padding=pad,
    )


@register_dataset("image-folder", modality="image")
def image_folder(root: Path, path: str | None = None, image_size: int | None = None) -> ImageDataset:
    """Your own images, one sub-folder per class (give the folder as the task's path)."""
    if not path:
        raise ConfigError("image-folder: set the task's path to the folder of class sub-folders")
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists():
        p = Path(root) / p
    return load_image_folder(p, image_size)
