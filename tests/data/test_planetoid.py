"""Planetoid loaders on the real files."""

from __future__ import annotations

import shutil

import pytest

from attnas.data.planetoid import load_planetoid
from attnas.errors import DataError


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
