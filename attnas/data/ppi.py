"""PPI (protein-protein interaction, 24 graphs, 121 labels) in torch_geometric's layout.

Expected files, in ``<root>/PPI/raw`` (or ``<root>/PPI``)::

    {train,valid,test}_graph.json     networkx node-link graphs
    {train,valid,test}_feats.npy      [N, 50] node features
    {train,valid,test}_labels.npy     [N, 121] {0,1} labels
    {train,valid,test}_graph_id.npy   [N] graph id of every node

The graphs are built as :class:`torch_geometric.datasets.PPI` builds them (one ``Data``
per graph id, node ids relabelled from 0, self-loops removed), from JSON and from
``.npy`` files read with ``allow_pickle=False``: no file is unpickled. Because building
them takes a while, the result is cached in the per-user cache, under the SHA-256 of the
raw files, as a checksummed file of tensors that loads with ``weights_only=True``
(:func:`attnas.runs.checkpoint_files.load_checkpoint_file`); the data root itself is written only
when the files are missing and are downloaded through :class:`torch_geometric.datasets.PPI`
(:mod:`attnas.data.download`; not with ``ATTNAS_OFFLINE`` set), whose raw folder is this layout.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops

from attnas.core.errors import CheckpointError, DataError
from attnas.data.download import Source
from attnas.data.graphs import GraphDataset, validate_graph
from attnas.data.root import default_cache_dir, require_files
from attnas.registry import register_dataset
from attnas.runs.checkpoint_files import load_checkpoint_file, save_checkpoint_file

PPI_FILES = tuple(f"{s}_{kind}" for s in ("train", "valid", "test")
                  for kind in ("graph.json", "feats.npy", "labels.npy", "graph_id.npy"))
#: Our split names and the file prefixes they are read from.
SPLITS = (("train", "train"), ("val", "valid"), ("test", "test"))
#: Changes whenever the way graphs are built changes (old cache entries are then ignored).
_CACHE_VERSION = b"attnas-ppi-1"


def ppi_raw_dir(root: Path) -> Path:
    """The folder holding the PPI raw files."""
    for cand in (root / "PPI" / "raw", root / "PPI"):
        if (cand / "train_graph.json").exists():
            return cand
    return root / "PPI" / "raw"


def _build_pyg_ppi(staging: Path) -> str:
    from torch_geometric.datasets import PPI

    return PPI(str(staging)).raw_dir


#: Downloads the raw files through torch_geometric's own class.
PPI_SOURCE = Source("torch_geometric.datasets.PPI", _build_pyg_ppi)


def raw_digest(raw: Path) -> str:
    """SHA-256 of the raw files' contents (the cache key)."""
    h = hashlib.sha256(_CACHE_VERSION)
    for name in PPI_FILES:
        h.update(name.encode() + b"\0")
        with open(raw / name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _read_split(raw: Path, prefix: str) -> list[dict[str, torch.Tensor]]:
    """The graphs of one split as torch_geometric's ``PPI.process`` builds them."""
    import networkx as nx
    from networkx.readwrite import json_graph

    with open(raw / f"{prefix}_graph.json", encoding="utf-8") as f:
        graph = nx.DiGraph(json_graph.node_link_graph(json.load(f), edges="links"))
    x = torch.from_numpy(np.load(raw / f"{prefix}_feats.npy", allow_pickle=False)).to(torch.float)
    y = torch.from_numpy(np.load(raw / f"{prefix}_labels.npy", allow_pickle=False)).to(torch.float)
    idx = torch.from_numpy(np.load(raw / f"{prefix}_graph_id.npy", allow_pickle=False)).to(torch.long)
    idx = idx - idx.min()
    graphs = []
    for i in range(int(idx.max()) + 1):
        mask = idx == i
        sub = graph.subgraph(mask.nonzero(as_tuple=False).view(-1).tolist())
        edge_index = torch.tensor(list(sub.edges)).t().contiguous()
        edge_index = edge_index - edge_index.min()
        edge_index, _ = remove_self_loops(edge_index)
        graphs.append({"x": x[mask], "edge_index": edge_index, "y": y[mask]})
    return graphs


def _build(raw: Path) -> dict[str, list[dict[str, torch.Tensor]]]:
    try:
        return {ours: _read_split(raw, prefix) for ours, prefix in SPLITS}
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - report malformed files clearly
        raise DataError(f"PPI: could not read the files in {raw}: {exc}") from None


def read_ppi(raw: Path, cache: bool = True) -> dict[str, list[Data]]:
    """The PPI graphs of each split, from the cache when it holds these raw files.

    Args:
        raw: The folder holding the raw files.
        cache: Read and write the per-user cache.

    Returns:
        ``{"train": [Data, ...], "val": [...], "test": [...]}``.
    """
    path = default_cache_dir() / "ppi-processed" / f"{raw_digest(raw)}.pt" if cache else None
    splits = None
    if path is not None and path.exists():
        try:
            splits = load_checkpoint_file(path)["splits"]
        except (CheckpointError, KeyError, TypeError):
            splits = None  # unreadable: built again and overwritten
    if splits is None:
        splits = _build(raw)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                save_checkpoint_file(path, {"splits": splits})
            except OSError:
                pass  # a read-only cache only costs the time to build again
    return {split: [Data(**g) for g in graphs] for split, graphs in splits.items()}


def load_ppi(root: Path, **_: object) -> GraphDataset:
    """Load PPI as an inductive dataset (20 train, 2 validation, 2 test graphs).

    Raises:
        DataError: Naming the missing files and where they are expected, or the file
            that cannot be read.
    """
    raw = ppi_raw_dir(root)
    require_files(raw, PPI_FILES, "PPI", PPI_SOURCE)
    splits = read_ppi(raw)
    for split, graphs in splits.items():
        if not graphs:
            raise DataError(f"PPI: the {split} split has no graphs")
    num_labels = splits["train"][0].y.size(1)
    for split, graphs in splits.items():
        for i, g in enumerate(graphs):
            validate_graph(g, f"PPI {split} graph {i}", multilabel=True, num_classes=num_labels, need_masks=False)
    return GraphDataset(name="ppi", num_features=splits["train"][0].num_features, num_classes=num_labels,
                        multilabel=True, graphs=splits)


register_dataset("ppi", group="graph")(load_ppi)
