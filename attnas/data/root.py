"""Where datasets live.

Loaders take a data root, resolved in this order: an explicit ``data_dir``
(the ``--data-dir`` flag), else the ``ATTNAS_DATA`` environment variable, else a
per-user cache (``$XDG_CACHE_HOME/attnas/data`` or ``~/.cache/attnas/data``).
Nothing is downloaded at run time: when a file is missing, :func:`require_files`
says exactly which files are expected where.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from attnas.errors import DataError

ENV_VAR = "ATTNAS_DATA"


def default_cache_dir() -> Path:
    """The per-user data cache used when neither a flag nor ``ATTNAS_DATA`` is set."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attnas" / "data"


def resolve_data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """Resolve the data root.

    Args:
        data_dir: An explicit root (``--data-dir``); takes precedence when given.

    Returns:
        The data root as an absolute path (it may not exist yet).
    """
    if data_dir:
        return Path(data_dir).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return default_cache_dir()


def require_files(folder: Path, names: Iterable[str], dataset: str) -> list[Path]:
    """Check that every file in ``names`` exists in ``folder``.

    Args:
        folder: The folder the files are expected in.
        names: File names relative to ``folder``.
        dataset: The dataset's name, for the message.

    Returns:
        The full paths, in the order given.

    Raises:
        DataError: Naming every missing file and the folder it is expected in.
    """
    paths = [folder / n for n in names]
    missing = [p.name if p.parent == folder else str(p.relative_to(folder)) for p in paths if not p.exists()]
    if missing:
        raise DataError(
            f"{dataset}: missing {', '.join(missing)} in {folder} "
            f"(set --data-dir or ${ENV_VAR} to the folder that holds the data; nothing is downloaded)"
        )
    return paths
