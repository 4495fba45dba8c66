"""Where datasets live.

Loaders take a data root, resolved in this order: an explicit ``data_dir``
(the ``--data-dir`` flag), else the ``ATTNAS_DATA`` environment variable, else a
per-user cache (``$XDG_CACHE_HOME/attnas/data`` or ``~/.cache/attnas/data``).
When a file is missing, :func:`require_files` says exactly which files are expected
where; for a named dataset that torch_geometric can fetch, it first downloads them
through torch_geometric's own dataset class (:mod:`attnas.data.download`), unless
``ATTNAS_OFFLINE`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from attnas.core.errors import DataError
from attnas.data.download import OFFLINE_VAR, DownloadFailed, Source, download_missing, downloads_allowed

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


def require_files(folder: Path, names: Iterable[str], dataset: str, source: Source | None = None) -> list[Path]:
    """Check that every file in ``names`` exists in ``folder``, downloading missing ones from ``source``.

    Args:
        folder: The folder the files are expected in.
        names: File names relative to ``folder``.
        dataset: The dataset's name, for the message.
        source: Where the files can be downloaded from (a torch_geometric dataset class);
            ``None`` for files nobody downloads. Not used when ``$ATTNAS_OFFLINE`` is set.

    Returns:
        The full paths, in the order given.

    Raises:
        DataError: Naming every missing file and the folder it is expected in, and why
            nothing was downloaded (no source, ``$ATTNAS_OFFLINE``, or the download's error).
    """
    paths = [folder / n for n in names]
    missing = _missing(folder, paths)
    if not missing:
        return paths
    hint = f"set --data-dir or ${ENV_VAR} to the folder that holds the data"
    if source is None:
        reason = "nothing is downloaded"
    elif not downloads_allowed():
        reason = f"downloads are off (--offline or ${OFFLINE_VAR}), so nothing is downloaded"
    else:
        try:
            download_missing(folder, missing, source)
        except DownloadFailed as exc:
            raise DataError(f"{dataset}: missing {', '.join(missing)} in {folder}, and {exc}; put the files "
                            f"there (see docs/own_data.md) or {hint}") from None
        return paths
    raise DataError(f"{dataset}: missing {', '.join(missing)} in {folder} ({hint}; {reason})")


def _missing(folder: Path, paths: list[Path]) -> list[str]:
    """The names, relative to ``folder``, of the paths that do not exist."""
    return [p.name if p.parent == folder else str(p.relative_to(folder)) for p in paths if not p.exists()]
