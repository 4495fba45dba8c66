"""PPI in torch_geometric's layout, on small files written here in that layout."""

from __future__ import annotations

import pytest

from attnas.data.ppi import PPI_FILES, load_ppi
from attnas.errors import DataError


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
