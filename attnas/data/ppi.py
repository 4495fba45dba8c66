"""PPI (protein-protein interaction, 24 graphs, 121 labels) in torch_geometric's layout.

Expected files, in ``<root>/PPI/raw`` (or ``<root>/PPI``)::

    {train,valid,test}_graph.json     networkx node-link graphs
    {train,valid,test}_feats.npy      [N, 50] node features
    {train,valid,test}_labels.npy     [N, 121] {0,1} labels
    {train,valid,test}_graph_id.npy   [N] graph id of every node

Processing is done by :class:`torch_geometric.datasets.PPI` itself. Because the data
root may be read-only, it runs on a shadow root in the per-user cache whose ``raw``
folder links to the real files; the processed tensors are cached there.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from attnas._registry import register_dataset
from attnas.data.graphs import GraphDataset, validate_graph
from attnas.data.root import default_cache_dir, require_files
from attnas.errors import DataError

PPI_FILES = tuple(f"{s}_{kind}" for s in ("train", "valid", "test")
                  for kind in ("graph.json", "feats.npy", "labels.npy", "graph_id.npy"))


def ppi_raw_dir(root: Path) -> Path:
    """The folder holding the PPI raw files."""
    for cand in (root / "PPI" / "raw", root / "PPI"):
        if (cand / "train_graph.json").exists():
            return cand
    return root / "PPI" / "raw"


def _shadow_root(raw: Path) -> Path:
    digest = hashlib.sha1(str(raw.resolve()).encode()).hexdigest()[:12]
    shadow = default_cache_dir() / "pyg" / f"PPI-{digest}"
    shadow.mkdir(parents=True, exist_ok=True)
    link = shadow / "raw"
    if not link.exists():
        os.symlink(raw.resolve(), link, target_is_directory=True)
    return shadow


def load_ppi(root: Path, **_: object) -> GraphDataset:
    """Load PPI as an inductive dataset (20 train, 2 validation, 2 test graphs).

    Raises:
        DataError: Naming the missing files and where they are expected.
    """
    from torch_geometric.datasets import PPI

    raw = ppi_raw_dir(root)
    require_files(raw, PPI_FILES, "PPI")
    from attnas.data.graph_file import _safe_globals

    try:
        with torch.serialization.safe_globals(_safe_globals()):  # PyG re-loads its processed files
            splits = {ours: list(PPI(str(_shadow_root(raw)), split=theirs))
                      for ours, theirs in (("train", "train"), ("val", "val"), ("test", "test"))}
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - report malformed files clearly
        raise DataError(f"PPI: could not read the files in {raw}: {exc}") from None
    num_labels = splits["train"][0].y.size(1)
    for split, graphs in splits.items():
        if not graphs:
            raise DataError(f"PPI: the {split} split has no graphs")
        for i, g in enumerate(graphs):
            validate_graph(g, f"PPI {split} graph {i}", multilabel=True, num_classes=num_labels, need_masks=False)
    return GraphDataset(name="ppi", num_features=splits["train"][0].num_features, num_classes=num_labels,
                        multilabel=True, graphs=splits)


register_dataset("ppi", group="graph")(load_ppi)
