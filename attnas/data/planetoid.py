"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the public split.

Reads torch_geometric's raw Planetoid format (``ind.<name>.{x,tx,allx,y,ty,ally,graph,
test.index}``) from ``<root>/Planetoid/<Name>/raw`` with
:func:`torch_geometric.io.read_planetoid_data`, which writes nothing (the data root may
be read-only). Features are row-normalised by default, as GCN and GAT do.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch_geometric.io import read_planetoid_data

from attnas._registry import register_dataset
from attnas.data.graphs import GraphDataset, validate_graph
from attnas.data.root import require_files

_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def planetoid_raw_dir(root: Path, name: str) -> Path:
    """``<root>/Planetoid/<Name>/raw`` (also accepts ``<root>/<Name>/raw``)."""
    proper = _NAMES[name]
    for cand in (root / "Planetoid" / proper / "raw", root / proper / "raw"):
        if cand.exists():
            return cand
    return root / "Planetoid" / proper / "raw"


def load_planetoid(root: Path, name: str, normalize_features: bool = True) -> GraphDataset:
    """Load a Planetoid dataset with its public split.

    Args:
        root: The data root.
        name: ``cora``, ``citeseer`` or ``pubmed``.
        normalize_features: Row-normalise the bag-of-words features.

    Raises:
        DataError: Naming every missing raw file and the folder it is expected in.
    """
    raw = planetoid_raw_dir(root, name)
    require_files(raw, [f"ind.{name}.{s}" for s in _SUFFIXES], _NAMES[name])
    data = read_planetoid_data(str(raw), name)
    if normalize_features:
        s = data.x.sum(dim=1, keepdim=True).clamp(min=1.0)
        data.x = data.x / s
    validate_graph(data, _NAMES[name])
    return GraphDataset(name=name, num_features=data.num_features, num_classes=int(data.y.max()) + 1, graph=data)


def _make(name: str):
    def loader(root: Path, normalize_features: bool = True, **_: object) -> GraphDataset:
        return load_planetoid(root, name, normalize_features)

    loader.__doc__ = f"{_NAMES[name]} citation graph (Planetoid public split)."
    return loader


for _name in _NAMES:
    register_dataset(_name, group="graph")(_make(_name))

__all__ = ["load_planetoid", "planetoid_raw_dir", "torch"]
