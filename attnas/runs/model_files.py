"""A run's ``model.pt``: a plain ``torch.save`` file that rebuilds the model without its data.

``model.pt`` holds tensors and plain Python data only, so ``torch.load(path,
weights_only=True)`` reads it with nothing but torch::

    {"format": "attnas-model", "format_version": 2, "attnas_version": "0.1.0",
     "config": {...},          # the run's resolved RunConfig (RunConfig.to_dict())
     "arch": {...},            # the found architecture (Arch.to_dict())
     "task_info": {...},       # what the space's build() reads: kind, in_dim, num_classes, ...
     "state_dict": {...}}      # the trained weights

Its SHA-256 sits beside it in ``model.pt.sha256`` (``sha256sum`` format); attnas checks it on
every load. ``task_info`` is the task's :class:`~attnas.tasks.base.TaskInfo` as plain data: a
tensor in it (a text task's initial word embeddings) is kept as its shape and dtype only, since
the trained values are in ``state_dict``. :func:`saved_task` turns it back into a stand-in task
that ``space.build(arch, task)`` accepts, so the model is rebuilt without the training data.

Run folders written before this format keep a ``model.pt`` behind the ``ATTNAS-CKPT-1``
checksum header of :mod:`attnas.runs.checkpoint_files`; :func:`load_model_file` still reads them
(they have no ``task_info``: rebuilding one needs its task's data).
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from attnas.core.errors import CheckpointError
from attnas.runs.atomic_files import atomic_write_bytes, atomic_write_text
from attnas.runs.checkpoint_files import _MAGIC, load_checkpoint_file
from attnas.tasks.base import TaskInfo

FORMAT = "attnas-model"
FORMAT_VERSION = 2
_TENSOR = "__tensor__"


def checksum_path(path: str | os.PathLike) -> Path:
    """The checksum file beside ``path`` (``model.pt`` -> ``model.pt.sha256``)."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checksum(path: str | os.PathLike, data: bytes) -> None:
    """Write ``<sha256 of data>  <file name>`` beside ``path`` (what ``sha256sum -c`` reads)."""
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {Path(path).name}\n")


def verify_checksum(path: str | os.PathLike, data: bytes) -> None:
    """Check ``data`` (the bytes of ``path``) against the checksum file beside it.

    A file without one (copied alone) is loaded with a warning.

    Raises:
        CheckpointError: When the checksum file is malformed or does not match.
    """
    side = checksum_path(path)
    if not side.exists():
        warnings.warn(f"{path}: no {side.name} beside it; loading it unverified", stacklevel=3)
        return
    fields = side.read_text(encoding="utf-8").split()
    if not fields or len(fields[0]) != 64:
        raise CheckpointError(f"{side} is malformed (expected '<sha256>  {Path(path).name}')")
    if hashlib.sha256(data).hexdigest() != fields[0].lower():
        raise CheckpointError(f"{path} is corrupt or truncated, or not the file {side.name} was written for "
                              f"(copied from another run without its {side.name}?): its SHA-256 differs")


def plain_task_info(info: TaskInfo) -> dict:
    """``info`` as plain data that ``torch.load(weights_only=True)`` reads back.

    Tensors (and callables that return one, such as a text task's ``embeddings``) become
    ``{"__tensor__": shape, "dtype": name}``: their trained values live in the state_dict.
    """
    return {"kind": info.kind, "in_dim": int(info.in_dim), "num_classes": int(info.num_classes),
            "multilabel": bool(info.multilabel), "extra": _plain(info.extra)}


def _plain(value: Any) -> Any:
    if callable(value) and not isinstance(value, type):
        value = value()
    if isinstance(value, torch.Tensor):
        return {_TENSOR: list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _restored(value: Any) -> Any:
    if isinstance(value, dict):
        if _TENSOR in value:
            return torch.zeros(value[_TENSOR], dtype=getattr(torch, value.get("dtype", "float32")))
        return {k: _restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restored(v) for v in value]
    return value


class SavedTask:
    """A stand-in for a task when only its stored facts are at hand (``space.build(arch, task)``
    reads ``task.info``; nothing here reads data).

    Args:
        info: The stored task facts (:func:`plain_task_info`).
    """

    def __init__(self, info: dict):
        self.info = TaskInfo(kind=info["kind"], in_dim=info["in_dim"], num_classes=info["num_classes"],
                             multilabel=info.get("multilabel", False), extra=_restored(info.get("extra", {})))
        self.device = torch.device("cpu")

    def to(self, device: torch.device | str) -> SavedTask:
        """Where the model is put (the stand-in holds no tensors of its own)."""
        self.device = torch.device(device)
        return self


def saved_task(payload: dict) -> SavedTask | None:
    """The stand-in task of a loaded ``model.pt`` payload (``None`` for a file without one)."""
    info = payload.get("task_info")
    return SavedTask(info) if info else None


def model_payload(config: dict, arch: dict, state_dict: dict, info: TaskInfo | None, version: str) -> dict:
    """The dictionary ``model.pt`` holds (see the module docstring)."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "attnas_version": version, "config": config,
            "arch": arch, "task_info": plain_task_info(info) if info is not None else None,
            "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()}}


def save_model_file(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` with ``torch.save`` (atomically), then its checksum beside it."""
    buf = io.BytesIO()
    torch.save(payload, buf)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    write_checksum(path, data)


def load_model_file(path: str | os.PathLike) -> dict:
    """Read a ``model.pt`` of either format, verifying its checksum.

    Raises:
        CheckpointError: When the file is missing, corrupt, or holds more than tensors and plain data.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read model file {path}: {exc.strerror}") from None
    if data.startswith(_MAGIC):  # a run folder written before format 2
        return load_checkpoint_file(path)
    verify_checksum(path, data)
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path} could not be loaded: {' '.join(str(exc).split())[:300]}") from None
