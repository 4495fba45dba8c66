"""PPI in torch_geometric's layout, on small files written here in that layout."""

from __future__ import annotations

import pytest

from attnas.core.errors import DataError
from attnas.data.ppi import PPI_FILES, load_ppi


def test_loads_inductive_splits(tmp_path, write_ppi):
    write_ppi(tmp_path)
    ds = load_ppi(tmp_path)
    assert ds.inductive and ds.multilabel
    assert [len(ds.graphs[s]) for s in ("train", "val", "test")] == [3, 1, 1]
    assert (ds.num_features, ds.num_classes) == (5, 4)
    g = ds.graphs["train"][0]
    assert g.num_nodes == 6 and g.y.shape == (6, 4)
    assert g.edge_index.max() < 6  # relabelled per graph


def test_missing_files_are_named(tmp_path, write_ppi):
    raw = write_ppi(tmp_path)
    (raw / "valid_labels.npy").unlink()
    with pytest.raises(DataError, match="missing valid_labels.npy"):
        load_ppi(tmp_path)
    assert len(PPI_FILES) == 12


def test_graphs_equal_torch_geometric_s(tmp_path, write_ppi):
    """The graphs are those torch_geometric's PPI dataset builds from the same files."""
    import shutil

    import torch
    from torch_geometric.datasets import PPI

    from attnas.data.graph_file import _safe_globals

    raw = write_ppi(tmp_path / "ours")
    ours = load_ppi(tmp_path / "ours").graphs
    theirs_root = tmp_path / "theirs" / "PPI"
    shutil.copytree(raw, theirs_root / "raw")
    with torch.serialization.safe_globals(_safe_globals()):
        theirs = {s: list(PPI(str(theirs_root), split=s)) for s in ("train", "val", "test")}
    for split in ("train", "val", "test"):
        assert len(ours[split]) == len(theirs[split])
        for a, b in zip(ours[split], theirs[split]):
            assert sorted(a.keys()) == sorted(b.keys()) == ["edge_index", "x", "y"]
            for key in ("x", "edge_index", "y"):
                assert torch.equal(a[key], b[key]) and a[key].dtype == b[key].dtype, (split, key)


class _Marker:
    """Unpickling this creates a file: proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_the_cache_holds_tensors_only_and_is_rebuilt_when_unreadable(tmp_path, write_ppi, monkeypatch):
    """A planted cache file holding a pickled object is never unpickled: the graphs are built again."""
    import hashlib
    import io

    import torch

    from attnas.data import ppi
    from attnas.data.root import default_cache_dir

    raw = write_ppi(tmp_path)
    first = load_ppi(tmp_path).graphs
    cached = default_cache_dir() / "ppi-processed" / f"{ppi.raw_digest(raw)}.pt"
    assert cached.exists()

    def no_build(_):
        raise AssertionError("built again although the cache holds these files")

    with monkeypatch.context() as m:
        m.setattr(ppi, "_build", no_build)
        again = load_ppi(tmp_path).graphs
    assert all(torch.equal(a.x, b.x) for a, b in zip(first["train"], again["train"]))

    marker = tmp_path / "code-ran"
    buf = io.BytesIO()
    torch.save({"splits": _Marker(marker)}, buf)
    payload = buf.getvalue()  # a valid checksum: only weights_only loading stops it
    cached.write_bytes(b"ATTNAS-CKPT-1 " + hashlib.sha256(payload).hexdigest().encode() + b" 0\n" + payload)
    rebuilt = load_ppi(tmp_path).graphs
    assert not marker.exists()
    assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(first["train"], rebuilt["train"]))
    torch.load(io.BytesIO(payload), weights_only=False)  # the planted file really runs code when unpickled
    assert marker.exists()


def test_changed_raw_files_are_not_served_from_the_cache(tmp_path, write_ppi):
    import numpy as np

    raw = write_ppi(tmp_path)
    before = load_ppi(tmp_path).graphs["test"][0].x
    np.save(raw / "test_feats.npy", np.zeros((6, 5), np.float32))
    after = load_ppi(tmp_path).graphs["test"][0].x
    assert before.abs().sum() > 0 and after.abs().sum() == 0
