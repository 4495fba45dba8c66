"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the public split.

Reads torch_geometric's raw Planetoid format (``ind.<name>.{x,tx,allx,y,ty,ally,graph,
test.index}``) from ``<root>/Planetoid/<Name>/raw`` and builds the same ``Data`` as
:func:`torch_geometric.io.read_planetoid_data`, writing nothing (the data root may be
read-only). The ``ind.*`` files are pickles: they are read with
:class:`~attnas.data.safe_pickle.RestrictedUnpickler`, which builds only NumPy arrays,
SciPy CSR matrices and a ``defaultdict`` of lists, so a crafted file cannot run code;
every object is checked before it is used. Features are row-normalised by default, as
GCN and GAT do.

When the files are missing they are downloaded through
:class:`torch_geometric.datasets.Planetoid` (:mod:`attnas.data.download`; not with
``ATTNAS_OFFLINE`` set), whose raw folder is this layout. The downloaded files pass the
restricted reader before torch_geometric's processing unpickles them.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.io import read_txt_array
from torch_geometric.io.planetoid import edge_index_from_dict
from torch_geometric.utils import index_to_mask

from attnas.core.errors import DataError
from attnas.data.download import DownloadFailed, Source
from attnas.data.graphs import GraphDataset, validate_graph
from attnas.data.root import require_files
from attnas.data.safe_pickle import DEFAULTDICT_OF_LISTS, NUMPY_ARRAYS, SCIPY_CSR, restricted_load
from attnas.registry import register_dataset

_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
#: What the ``ind.*`` pickles may hold.
_ALLOWED = NUMPY_ARRAYS | SCIPY_CSR | DEFAULTDICT_OF_LISTS
_VAL_NODES = 500


def planetoid_raw_dir(root: Path, name: str) -> Path:
    """``<root>/Planetoid/<Name>/raw`` (also accepts ``<root>/<Name>/raw``)."""
    proper = _NAMES[name]
    for cand in (root / "Planetoid" / proper / "raw", root / proper / "raw"):
        if cand.exists():
            return cand
    return root / "Planetoid" / proper / "raw"


def planetoid_source(name: str) -> Source:
    """Download through :class:`torch_geometric.datasets.Planetoid`, checking the files first."""

    label = "torch_geometric.datasets.Planetoid"

    def build(staging: Path) -> str:
        from torch_geometric.datasets import Planetoid

        class CheckedPlanetoid(Planetoid):
            def download(self) -> None:
                super().download()
                raw = Path(self.raw_dir)
                absent = [f"ind.{name}.{s}" for s in _SUFFIXES if not (raw / f"ind.{name}.{s}").is_file()]
                if absent:
                    raise DownloadFailed(f"the download through {label} did not provide {', '.join(absent)}")
                read_planetoid(raw, name)  # refuse a crafted pickle before torch_geometric unpickles it

        return CheckedPlanetoid(str(staging), _NAMES[name]).raw_dir

    return Source(label, build)


def _unpickle(path: Path) -> Any:
    try:
        return restricted_load(path, _ALLOWED, encoding="latin1")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, KeyError,
            IndexError, OSError) as exc:
        raise DataError(f"{path} is not a Planetoid file ({exc})") from None


def _read_matrix(path: Path) -> torch.Tensor:
    """A feature or one-hot label matrix (dense or CSR) as a float tensor."""
    import scipy.sparse

    obj = _unpickle(path)
    if scipy.sparse.issparse(obj):
        try:
            obj.check_format(full_check=True)  # indices in range before anything reads them
        except (ValueError, TypeError, AttributeError) as exc:
            raise DataError(f"{path}: malformed sparse matrix ({exc})") from None
        obj = obj.toarray()
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise DataError(f"{path}: expected a 2-D array or sparse matrix, got {type(obj).__name__}"
                        + (f" of shape {obj.shape}" if isinstance(obj, np.ndarray) else ""))
    if not (np.issubdtype(obj.dtype, np.number) or obj.dtype == np.bool_):
        raise DataError(f"{path}: expected numbers, got dtype {obj.dtype}")
    return torch.from_numpy(np.asarray(obj)).to(torch.float)


def _read_graph(path: Path) -> dict[int, list[int]]:
    """The adjacency lists ``{node: [neighbour, ...]}``."""
    obj = _unpickle(path)
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected a mapping of adjacency lists, got {type(obj).__name__}")
    for node, neighbours in obj.items():
        if (not isinstance(node, (int, np.integer)) or not isinstance(neighbours, (list, tuple))
                or not all(isinstance(v, (int, np.integer)) for v in neighbours)):
            raise DataError(f"{path}: node {node!r} does not map to a list of node ids")
    return obj


def _read_index(path: Path) -> torch.Tensor:
    try:
        index = read_txt_array(str(path), dtype=torch.long)
    except (ValueError, RuntimeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: expected one node id per line ({exc})") from None
    return index.view(-1)


def read_planetoid(raw: Path, name: str) -> Data:
    """The graph, labels and public split of a Planetoid dataset, as torch_geometric builds them.

    Args:
        raw: The folder holding the ``ind.<name>.*`` files.
        name: ``cora``, ``citeseer`` or ``pubmed``.

    Returns:
        ``Data`` with ``x`` (unnormalised), ``edge_index``, ``y`` and the train, val and
        test masks of the public split.

    Raises:
        DataError: When a file is not of the format, or the files do not fit together.
    """
    x, tx, allx, y, ty, ally = (_read_matrix(raw / f"ind.{name}.{s}") for s in ("x", "tx", "allx", "y", "ty", "ally"))
    graph = _read_graph(raw / f"ind.{name}.graph")
    test_index = _read_index(raw / f"ind.{name}.test.index")
    try:
        sorted_test_index = test_index.sort()[0]
        if name == "citeseer":
            # isolated test nodes of CiteSeer are missing from tx/ty: they get zero rows
            span = int(test_index.max() - test_index.min()) + 1
            tx_ext = torch.zeros(span, tx.size(1), dtype=tx.dtype)
            tx_ext[sorted_test_index - test_index.min(), :] = tx
            ty_ext = torch.zeros(span, ty.size(1), dtype=ty.dtype)
            ty_ext[sorted_test_index - test_index.min(), :] = ty
            tx, ty = tx_ext, ty_ext
        x = torch.cat([allx, tx], dim=0)
        x[test_index] = x[sorted_test_index]
        labels = torch.cat([ally, ty], dim=0).max(dim=1)[1]
        labels[test_index] = labels[sorted_test_index]
    except (IndexError, RuntimeError) as exc:
        raise DataError(f"{raw}: the ind.{name}.* files do not fit together ({exc})") from None
    num_nodes = labels.size(0)
    if x.size(0) != num_nodes or y.size(0) + _VAL_NODES > num_nodes:
        raise DataError(f"{raw}: the ind.{name}.* files do not fit together ({x.size(0)} feature rows, "
                        f"{num_nodes} labels, {y.size(0)} training nodes)")
    if any(not 0 <= int(v) < num_nodes for node, nbrs in graph.items() for v in (node, *nbrs)):
        raise DataError(f"{raw}: ind.{name}.graph refers to nodes outside 0..{num_nodes - 1}")
    data = Data(x=x, edge_index=edge_index_from_dict(graph, num_nodes=num_nodes), y=labels)
    data.train_mask = index_to_mask(torch.arange(y.size(0), dtype=torch.long), size=num_nodes)
    data.val_mask = index_to_mask(torch.arange(y.size(0), y.size(0) + _VAL_NODES, dtype=torch.long), size=num_nodes)
    data.test_mask = index_to_mask(test_index, size=num_nodes)
    return data


def load_planetoid(root: Path, name: str, normalize_features: bool = True) -> GraphDataset:
    """Load a Planetoid dataset with its public split.

    Args:
        root: The data root.
        name: ``cora``, ``citeseer`` or ``pubmed``.
        normalize_features: Row-normalise the bag-of-words features.

    Raises:
        DataError: Naming every missing raw file and the folder it is expected in (after
            a download that failed or was not allowed), or the file that is not of the format.
    """
    raw = planetoid_raw_dir(root, name)
    require_files(raw, [f"ind.{name}.{s}" for s in _SUFFIXES], _NAMES[name], planetoid_source(name))
    data = read_planetoid(raw, name)
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

__all__ = ["load_planetoid", "planetoid_raw_dir", "read_planetoid", "torch"]
