"""A user's own graph: a torch_geometric ``Data`` (or a dict of tensors) saved with ``torch.save``.

The file needs ``x`` [N, F] float, ``edge_index`` [2, E] long and ``y`` [N] class ids
(or [N, C] {0,1} for multi-label); ``train_mask`` / ``val_mask`` / ``test_mask`` are
optional: without them a stratified 60/20/20 split is drawn with a fixed seed (and
said so). Files are loaded with ``weights_only=True``: only PyG's ``Data`` classes and
tensors are accepted, never arbitrary pickled code.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch_geometric.data import Data

from attnas._registry import register_dataset
from attnas.data.graphs import GraphDataset, random_split_masks, validate_graph
from attnas.errors import DataError


def _safe_globals() -> list:
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    return [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]


def load_graph_file(root: Path, path: str = "", split_seed: int = 0, **_: object) -> GraphDataset:
    """Load and validate a user's graph file.

    Args:
        root: Data root; a relative ``path`` is looked up there, then in the working folder.
        path: The ``.pt`` file.
        split_seed: Seed of the split drawn when the file has no masks.
    """
    if not path:
        raise DataError("graph-file: set task.path to the .pt file holding your graph")
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists() and (root / p).exists():
        p = root / p
    if not p.exists():
        raise DataError(f"graph-file: {p} does not exist")
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"graph-file: {p} is not a graph saved with torch.save "
                        f"(a torch_geometric Data or a dict of tensors): {str(exc).splitlines()[0]}") from None
    if isinstance(obj, dict):
        obj = Data(**obj)
    if not isinstance(obj, Data):
        raise DataError(f"graph-file: {p} holds a {type(obj).__name__}, expected a torch_geometric Data")
    data = obj
    multilabel = isinstance(getattr(data, "y", None), torch.Tensor) and data.y.dim() == 2
    has_masks = all(isinstance(getattr(data, f"{s}_mask", None), torch.Tensor) for s in ("train", "val", "test"))
    validate_graph(data, str(p), multilabel=multilabel, need_masks=False)
    if not has_masks:
        if multilabel:
            raise DataError(f"graph-file: {p} is multi-label and has no train/val/test masks; add them")
        warnings.warn(f"{p} has no train/val/test masks: drawing a stratified 60/20/20 split (seed {split_seed})",
                      stacklevel=2)
        data.train_mask, data.val_mask, data.test_mask = random_split_masks(data.y, seed=split_seed)
    validate_graph(data, str(p), multilabel=multilabel, need_masks=True)
    num_classes = data.y.size(1) if multilabel else int(data.y.max()) + 1
    return GraphDataset(name=p.stem, num_features=data.num_features, num_classes=num_classes,
                        multilabel=multilabel, graph=data)


register_dataset("graph-file", group="graph")(load_graph_file)
