"""Heterophilous node-classification graphs with fixed splits, in Platonov et al.'s ``.npz`` layout.

Platonov, Kuznedelev, Diskin, Babenko & Prokhorenkova, "A critical look at the evaluation of
GNNs under heterophily: are we really making progress?", ICLR 2023, publish Texas, Wisconsin
(with the Geom-GCN splits of Pei et al., ICLR 2020), filtered Chameleon and Squirrel,
Minesweeper, Tolokers, Roman-empire, ... as ``<name>.npz`` files holding

- ``node_features``: float, [N, F];
- ``node_labels``: integer class ids, [N];
- ``edges``: integer node ids, [E, 2], each undirected edge once (the reverse is added here);
- ``train_masks`` / ``val_masks`` / ``test_masks``: bool, [S, N], the S fixed splits (10).

Any file in this layout under ``<data root>/heterophilous/`` is read, so a user's own graph
works too. The files torch_geometric's :class:`~torch_geometric.datasets.HeterophilousGraphDataset`
fetches (the same files: roman_empire, amazon_ratings, minesweeper, tolokers, questions)
are downloaded through it when missing (:mod:`attnas.data.download`; not with
``ATTNAS_OFFLINE`` set). Texas, Wisconsin and the filtered Chameleon and Squirrel are not:
torch_geometric's ``WebKB`` and ``WikipediaNetwork`` fetch Geom-GCN's text files and the
unfiltered graphs, not these files. Files are read with ``allow_pickle=False`` (no code can be unpickled) and every
array is checked (:func:`check_arrays`, then :func:`~attnas.data.graphs.validate_graph` on
every split) before anything else happens: the first problem is named in a
:class:`~attnas.core.errors.DataError`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from attnas.core.errors import DataError
from attnas.data.download import Source
from attnas.data.graphs import SPLITS, GraphDataset, validate_graph
from attnas.data.root import require_files

FOLDER = "heterophilous"
#: The file stems torch_geometric's ``HeterophilousGraphDataset`` downloads (its raw file is ``<stem>.npz``).
PYG_NAMES = ("roman_empire", "amazon_ratings", "minesweeper", "tolokers", "questions")
KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")


def heterophilous_source(name: str) -> Source | None:
    """Download through :class:`torch_geometric.datasets.HeterophilousGraphDataset`, for its names only."""
    if name not in PYG_NAMES:
        return None

    def build(staging: Path) -> str:
        from torch_geometric.datasets import HeterophilousGraphDataset

        return HeterophilousGraphDataset(str(staging), name).raw_dir

    return Source("torch_geometric.datasets.HeterophilousGraphDataset", build)


def check_arrays(arrays: dict[str, np.ndarray], where: str) -> None:
    """Check the keys, shapes and dtypes of a heterophilous ``.npz``; raise :class:`DataError` naming the first problem."""
    missing = [k for k in KEYS if k not in arrays]
    if missing:
        raise DataError(f"{where}: missing key(s) {', '.join(missing)} (expected {', '.join(KEYS)})")
    x, y, edges = arrays["node_features"], arrays["node_labels"], arrays["edges"]
    if x.ndim != 2 or x.dtype.kind != "f":
        raise DataError(f"{where}: node_features must be a float array [N, F], got {x.dtype} {x.shape}")
    n = x.shape[0]
    if y.ndim != 1 or y.dtype.kind not in "iu" or y.shape[0] != n:
        raise DataError(f"{where}: node_labels must be an integer array [{n}], got {y.dtype} {y.shape}")
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
        raise DataError(f"{where}: edges must be an integer array [E, 2], got {edges.dtype} {edges.shape}")
    shape = None
    for split in SPLITS:
        m = arrays[f"{split}_masks"]
        if m.dtype != np.bool_ or m.ndim != 2 or m.shape[1] != n or (shape is not None and m.shape != shape):
            want = f"[{shape[0]}, {n}]" if shape is not None else f"[num_splits, {n}]"
            raise DataError(f"{where}: {split}_masks must be a bool array {want}, got {m.dtype} {m.shape}")
        shape = m.shape
    if shape[0] == 0:
        raise DataError(f"{where}: the masks hold no split")


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of ``path``, read without unpickling (``allow_pickle=False``)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{path}: not a readable .npz of plain arrays ({str(exc).splitlines()[0]})") from None


def graph_with_splits(x: torch.Tensor, y: torch.Tensor, edge_index: torch.Tensor, masks: dict[str, torch.Tensor],
                      name: str) -> GraphDataset:
    """A transductive :class:`GraphDataset` whose graph carries S fixed splits, each checked.

    Args:
        x: [N, F] float features.
        y: [N] class ids.
        edge_index: [2, E] directed edges (already symmetric).
        masks: ``{"train"|"val"|"test": [S, N] bool}``.
        name: Dataset name for messages.

    Returns:
        The dataset; its graph holds ``split_masks`` (the dict) and split 0 as
        ``train_mask`` / ``val_mask`` / ``test_mask``.
    """
    data = Data(x=x, edge_index=edge_index, y=y)
    num_classes = int(y.max()) + 1 if y.numel() else 0
    validate_graph(data, name, num_classes=num_classes, need_masks=False)
    for s in range(masks["train"].size(0)):
        for split in SPLITS:
            data[f"{split}_mask"] = masks[split][s]
        try:
            validate_graph(data, name, num_classes=num_classes)
        except DataError as exc:
            raise DataError(f"split {s}: {exc}") from None
    for split in SPLITS:
        data[f"{split}_mask"] = masks[split][0]
    data.split_masks = masks
    return GraphDataset(name=name, num_features=x.size(1), num_classes=num_classes, graph=data)


def load_heterophilous(root: Path, name: str, normalize_features: bool = False) -> GraphDataset:
    """Read and check ``<root>/heterophilous/<name>.npz``.

    Args:
        root: The data root.
        name: The file's stem (``texas``, ``wisconsin``, ``chameleon_filtered``, ...).
        normalize_features: Divide each node's features by their sum (rows summing to zero are kept).

    Raises:
        DataError: When the file is missing (and could not be downloaded) or any array is
            malformed (named in the message).
    """
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise DataError(f"heterophilous: task.dataset must be a file stem under {FOLDER}/, got {name!r}")
    (path,) = require_files(root / FOLDER, [f"{name}.npz"], name, heterophilous_source(name))
    arrays = read_npz(path)
    check_arrays(arrays, str(path))
    x = torch.from_numpy(arrays["node_features"]).float()
    if normalize_features:
        x = x / x.sum(1, keepdim=True).clamp_min(1e-12)
    y = torch.from_numpy(arrays["node_labels"]).long()
    edges = torch.from_numpy(arrays["edges"]).long().t()
    n = x.size(0)
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= n):
        bad = int(edges.max()) if int(edges.max()) >= n else int(edges.min())
        raise DataError(f"{path}: edges refer to node {bad}, but the graph has {n} nodes")
    edge_index = to_undirected(edges, num_nodes=n)  # each undirected edge once in the file: add the reverse
    masks = {split: torch.from_numpy(arrays[f"{split}_masks"]) for split in SPLITS}
    return graph_with_splits(x, y, edge_index, masks, str(path))
