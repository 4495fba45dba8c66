"""Files written atomically: a reader sees the old file or the whole new one, never half of one.

Every file is written to a temporary name in the same folder, flushed, fsynced and
renamed over the target, and the folder is fsynced; a failed write (a full disk) leaves
the target as it was and no temporary file behind. The run directory
(:mod:`attnas.runs.run_dir`), checkpoints (:mod:`attnas.runs.checkpoint_files`), reports and result
files are all written this way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, fsync folder: :func:`atomic_write_file`).

    A failed write (a full disk) leaves ``path`` as it was and no temporary file behind.
    """
    atomic_write_file(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_file(path: str | os.PathLike, write: Callable[[Path], Any]) -> None:
    """Let ``write(tmp)`` write a file that then replaces ``path`` atomically.

    ``tmp`` is in the same folder and ends like ``path`` (a figure library picks the format
    from it). A reader sees the old file or the whole new one, never half of one; when
    ``write`` fails the temporary file is removed and ``path`` is left as it was.

    Args:
        path: The file to (re)place.
        write: Writes the whole new file to the path it is given.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:  # on disk before the rename makes it the file
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=json_default) + "\n")


def json_default(obj: Any) -> Any:
    """``default`` of :func:`json.dumps` (files and events): tensors as lists, scalars with ``item()`` as numbers, paths as text."""
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
