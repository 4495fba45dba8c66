"""Planetoid loaders on the real files."""

from __future__ import annotations

import shutil

import pytest

from attnas.core.errors import DataError
from attnas.data.planetoid import load_planetoid
from code_marker import CodeRanMarker


@pytest.mark.parametrize("name,nodes,edges,features,classes", [
    ("cora", 2708, 10556, 1433, 7), ("citeseer", 3327, 9104, 3703, 6)])
def test_public_split(data_root, name, nodes, edges, features, classes):
    ds = load_planetoid(data_root, name)
    g = ds.graph
    assert (g.num_nodes, g.num_edges, ds.num_features, ds.num_classes) == (nodes, edges, features, classes)
    assert int(g.train_mask.sum()) == 20 * classes
    assert (int(g.val_mask.sum()), int(g.test_mask.sum())) == (500, 1000)
    # features are row-normalised
    s = g.x.sum(1)
    assert ((s - 1).abs() < 1e-5).logical_or(s == 0).all()


def test_pubmed_names_the_missing_file(data_root):
    with pytest.raises(DataError) as err:
        load_planetoid(data_root, "pubmed")
    msg = str(err.value)
    assert "ind.pubmed.allx" in msg and "Planetoid/PubMed/raw" in msg
    assert "ind.pubmed.tx" not in msg  # only what is missing


def test_missing_folder_lists_all_files(tmp_path):
    with pytest.raises(DataError, match="missing ind.cora.x, ind.cora.tx"):
        load_planetoid(tmp_path, "cora")


def test_readonly_root_is_not_written(data_root, tmp_path):
    raw = data_root / "Planetoid" / "Cora" / "raw"
    before = sorted(p.name for p in raw.parent.iterdir())
    load_planetoid(data_root, "cora")
    assert sorted(p.name for p in raw.parent.iterdir()) == before
    # a copy in a user folder loads the same
    dst = tmp_path / "Planetoid" / "Cora" / "raw"
    shutil.copytree(raw, dst)
    assert load_planetoid(tmp_path, "cora").graph.num_nodes == 2708


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_same_data_as_torch_geometric(data_root, name):
    """The restricted reader builds exactly the Data torch_geometric's (unrestricted) reader builds."""
    import warnings

    import torch
    from torch_geometric.io import read_planetoid_data

    from attnas.data.planetoid import planetoid_raw_dir, read_planetoid

    raw = planetoid_raw_dir(data_root, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = read_planetoid_data(str(raw), name)
    ours = read_planetoid(raw, name)
    assert sorted(ours.keys()) == sorted(theirs.keys()) == ["edge_index", "test_mask", "train_mask", "val_mask",
                                                            "x", "y"]
    for key in theirs.keys():
        assert ours[key].dtype == theirs[key].dtype and torch.equal(ours[key], theirs[key]), key


def _cora_folder(root, x_object):
    """A Cora raw folder whose ``ind.cora.x`` pickles ``x_object`` (the other files are empty)."""
    import pickle

    raw = root / "Planetoid" / "Cora" / "raw"
    raw.mkdir(parents=True)
    for suffix in ("tx", "allx", "y", "ty", "ally", "graph", "test.index"):
        (raw / f"ind.cora.{suffix}").write_bytes(b"")
    (raw / "ind.cora.x").write_bytes(pickle.dumps(x_object, protocol=2))
    return raw


def test_a_pickled_object_in_a_raw_file_is_refused_not_run(tmp_path):
    import pickle

    marker = tmp_path / "code-ran"
    raw = _cora_folder(tmp_path / "data", CodeRanMarker(marker))
    with pytest.raises(DataError, match=r"ind.cora.x is not a Planetoid file \(refusing to load "):
        load_planetoid(tmp_path / "data", "cora")
    assert not marker.exists()
    with open(raw / "ind.cora.x", "rb") as f:
        pickle.load(f)  # the file really runs code when unpickled without restrictions
    assert marker.exists()


def test_a_sparse_matrix_with_indices_out_of_range_is_refused(tmp_path):
    import numpy as np
    import scipy.sparse

    m = scipy.sparse.csr_matrix(np.eye(3, dtype=np.float32))
    m.indices[1] = 10 ** 6  # toarray() would write outside the array
    _cora_folder(tmp_path, m)
    with pytest.raises(DataError, match="ind.cora.x: malformed sparse matrix"):
        load_planetoid(tmp_path, "cora")


@pytest.mark.parametrize("obj,message", [
    ([1, 2, 3], "expected a 2-D array or sparse matrix, got list"),
    ("text", "expected a 2-D array or sparse matrix, got str"),
])
def test_a_raw_file_of_another_kind_is_named(tmp_path, obj, message):
    _cora_folder(tmp_path, obj)
    with pytest.raises(DataError, match=message):
        load_planetoid(tmp_path, "cora")
