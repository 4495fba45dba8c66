"""A user's own graph: a torch_geometric ``Data`` (or a dict of tensors) saved with ``torch.save``.

The file needs ``x`` [N, F] float, ``edge_index`` [2, E] long and ``y`` [N] class ids
(or [N, C] {0,1} for multi-label); other float and integer widths are cast (float64
features to float32, int32 labels to int64), with a warning that says so; ``train_mask`` / ``val_mask`` / ``test_mask`` are
optional: without them a stratified 60/20/20 split is drawn with a fixed seed (and
said so). Files are loaded with ``weights_only=True``: only PyG's ``Data`` classes and
tensors are accepted, never arbitrary pickled code.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch_geometric.data import Data

from attnas.core.errors import DataError
from attnas.data.graphs import GraphDataset, random_split_masks, validate_graph
from attnas.registry import register_dataset


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
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise DataError(f"graph-file: {p} holds a dict with the key {bad[0]!r}; its keys must be the names "
                            "x, edge_index, y (and train_mask, val_mask, test_mask)")
        obj = Data(**obj)
    if not isinstance(obj, Data):
        raise DataError(f"graph-file: {p} holds a {type(obj).__name__}, expected a torch_geometric Data")
    data = normalise_dtypes(obj, str(p))
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
    if not multilabel:
        trained = data.y[data.train_mask].unique()
        if len(trained) < 2:
            raise DataError(f"graph-file: {p}: the training nodes hold {len(trained)} class"
                            f"{'' if len(trained) == 1 else 'es'} ({', '.join(map(str, trained.tolist())) or 'none'}); "
                            "a classifier needs at least two")
    return GraphDataset(name=p.stem, num_features=data.num_features, num_classes=num_classes,
                        multilabel=multilabel, graph=data)


def normalise_dtypes(data: Data, name: str) -> Data:
    """Cast the types users save by default to those the networks take, saying so once.

    Float features (NumPy's float64, half precision) become float32; integer class ids of
    another width (int32, uint8, ...) become int64, as do edge indices. A label tensor
    that is not a vector or matrix (a 0-d tensor) is refused.

    Raises:
        DataError: For a ``y`` or ``x`` that is a 0-d tensor.
    """
    casts = []
    for key, want in (("x", torch.float32), ("y", torch.int64), ("edge_index", torch.int64)):
        t = getattr(data, key, None)
        if not isinstance(t, torch.Tensor):
            continue
        if t.dim() == 0:
            raise DataError(f"graph-file: {name}: {key} is a single number (a 0-d tensor); it must hold one row "
                            "per node")
        if key == "x" and t.is_floating_point() and t.dtype != want:
            setattr(data, key, t.to(want))
        elif key != "x" and not t.is_floating_point() and t.dtype not in (want, torch.bool):
            if key == "y" and t.dim() == 2:  # multi-label {0, 1}: kept as it is
                continue
            setattr(data, key, t.to(want))
        else:
            continue
        casts.append(f"{key} {t.dtype} -> {want}")
    if casts:
        warnings.warn(f"{name}: cast {', '.join(casts)}", stacklevel=3)
    return data


register_dataset("graph-file", group="graph")(load_graph_file)
