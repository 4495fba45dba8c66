"""Fetching a named dataset's missing raw files through torch_geometric's own dataset class.

When raw files of a named graph dataset (Cora, CiteSeer, PubMed, PPI, and the heterophilous
graphs that :class:`torch_geometric.datasets.HeterophilousGraphDataset` knows) are missing
under the data root, the loader builds the dataset's torch_geometric class in a staging
folder beside the files' destination: the class downloads its files from its usual source
and processes them, as it does for any torch_geometric user. The raw files attnas reads are
then moved into place and the staging folder (with torch_geometric's processed copy) is
removed, so the data root ends up in the layout a user would fill by hand
(``docs/own_data.md``). A failed download leaves nothing behind: the staging folder and any
folder it had to create are removed, and the loader reports one line saying what failed.

Setting ``ATTNAS_OFFLINE=1`` forbids downloads (the tests set it); the missing files are
then reported as before, saying why nothing was downloaded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Set to anything but ``""``, ``0``, ``false`` or ``no`` to forbid downloads.
OFFLINE_VAR = "ATTNAS_OFFLINE"


def downloads_allowed() -> bool:
    """Whether a missing named dataset may be downloaded (``$ATTNAS_OFFLINE`` unset or false)."""
    return os.environ.get(OFFLINE_VAR, "").strip().lower() in ("", "0", "false", "no")


@dataclass(frozen=True)
class Source:
    """Where a named dataset's raw files can be downloaded from.

    Attributes:
        label: What does the download, for messages (``torch_geometric.datasets.Planetoid``).
        build: Given an empty staging folder, builds the torch_geometric dataset there (which
            downloads and processes its files) and returns the folder holding its raw files.
    """

    label: str
    build: Callable[[Path], str | os.PathLike]


class DownloadFailed(Exception):
    """A download through a :class:`Source` did not provide the files; the message says why."""


def _first_line(exc: BaseException, staging: Path | None) -> str:
    """``Type: first line of the message``, with the staging folder (removed by then) left out of paths."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line.replace(f"{staging}{os.sep}", "") if staging is not None else line


def _absent_ancestors(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    absent = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        absent.append(path)
    return absent


def download_missing(folder: Path, names: Sequence[str], source: Source) -> None:
    """Download the files ``names`` into ``folder`` through ``source``.

    The files are fetched in a staging folder next to ``folder`` and moved into place only
    when all of them arrived; files already in ``folder`` are kept.

    Args:
        folder: Where the loader expects the files.
        names: The missing files, relative to ``folder``.
        source: The torch_geometric class that fetches them.

    Raises:
        DownloadFailed: Saying what failed; nothing written by the attempt is left behind.
    """
    created = _absent_ancestors(folder)
    staging = None
    done = False
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".attnas-download-", dir=folder.parent))
        raw = Path(source.build(staging))
        absent = [n for n in names if not (raw / n).is_file()]
        if absent:
            raise DownloadFailed(f"the download through {source.label} did not provide {', '.join(absent)}")
        for name in names:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(raw / name, folder / name)
        done = True
    except DownloadFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - network, permission, HTTP and format errors all end the same way
        raise DownloadFailed(f"downloading them through {source.label} failed ({_first_line(exc, staging)})") from None
    finally:  # also on Ctrl-C: no staging folder is left behind
        _clean(staging, [] if done else created)


def _clean(staging: Path | None, created: list[Path]) -> None:
    """Remove the staging folder, then the folders the attempt created (deepest first) while empty."""
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
    for path in created:
        try:
            path.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty (someone else wrote there) or not ours to remove
            return


__all__ = ["OFFLINE_VAR", "DownloadFailed", "Source", "download_missing", "downloads_allowed"]
