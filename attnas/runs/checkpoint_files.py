"""Checkpoint files: ``torch.save`` payloads behind a checksummed header, written atomically.

The header line is ``ATTNAS-CKPT-1 <sha256 of payload> <events offset>``; the payload is
verified on every read, so a truncated or corrupt file raises
:class:`~attnas.core.errors.CheckpointError` instead of loading, and loading takes tensors and
plain data only (``weights_only=True``), never code. The run directory
(:meth:`attnas.runs.run_dir.RunDir.save_checkpoint`) keeps its checkpoints in such files.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import torch

from attnas.core.errors import CheckpointError
from attnas.runs.atomic_files import atomic_write_bytes

_MAGIC = b"ATTNAS-CKPT-1 "


def save_checkpoint_file(path: str | os.PathLike, state: dict, events_offset: int = 0) -> None:
    """Save ``state`` (tensors and plain data only) with a checksum header, atomically.

    The header line is ``ATTNAS-CKPT-1 <sha256 of payload> <events offset>``.
    """
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest()
    atomic_write_bytes(path, _MAGIC + f"{digest} {int(events_offset)}".encode() + b"\n" + payload)


def _read_verified(path: Path) -> tuple[int, bytes]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror}") from None
    if not raw.startswith(_MAGIC):
        raise CheckpointError(f"{path} is not an attnas checkpoint (bad header)")
    header_end = raw.find(b"\n", len(_MAGIC))
    if header_end < 0:
        raise CheckpointError(f"{path} is truncated (no checksum line)")
    fields = raw[len(_MAGIC) : header_end].decode(errors="replace").split()
    if len(fields) != 2 or not fields[1].isdigit():
        raise CheckpointError(f"{path} has a malformed header")
    payload = raw[header_end + 1 :]
    if hashlib.sha256(payload).hexdigest() != fields[0]:
        raise CheckpointError(f"{path} is corrupt or truncated (checksum mismatch)")
    return int(fields[1]), payload


def checkpoint_events_offset(path: str | os.PathLike) -> int:
    """The events.jsonl offset stored in a checkpoint (verifying its checksum)."""
    return _read_verified(Path(path))[0]


def load_checkpoint_file(path: str | os.PathLike) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint_file`, verifying its checksum.

    Loading uses ``torch.load(weights_only=True)``: a checkpoint can hold tensors and
    plain data, never code.

    Raises:
        CheckpointError: When the file is missing, truncated, corrupt or not a checkpoint.
    """
    path = Path(path)
    _, payload = _read_verified(path)
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path} could not be loaded: {exc}") from None
