"""Heterophilous graphs in Platonov et al.'s .npz layout: the real files load; every bad file is
one line, exit 2, nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnas.cli import app
from attnas.core.errors import DataError
from attnas.data.heterophilous import load_heterophilous
from heterophilous_files import arrays, write


def test_real_texas_loads_with_reverse_edges_and_ten_splits(data_root):
    ds = load_heterophilous(data_root, "texas")
    g = ds.graph
    assert (g.num_nodes, ds.num_features, ds.num_classes) == (183, 1703, 5)
    assert g.split_masks["train"].shape == (10, 183)
    pairs = set(map(tuple, g.edge_index.t().tolist()))
    assert all((b, a) in pairs for a, b in pairs)  # every edge in both directions


def test_small_file_loads(tmp_path):
    write(tmp_path)
    ds = load_heterophilous(tmp_path, "tiny")
    assert ds.graph.edge_index.size(1) == 2 * (20 + 7) and ds.num_classes == 3


def nan_features():
    x = arrays()["node_features"]
    x[4, 2] = np.nan
    return x


def bad_mask():
    return np.zeros((10, 19), dtype=bool)


BAD = [
    ({"edges": None}, "missing key(s) edges"),
    ({"val_masks": bad_mask()}, "val_masks must be a bool array [10, 20], got bool (10, 19)"),
    ({"edges": np.array([[0, 1], [2, 25]])}, "edges refer to node 25, but the graph has 20 nodes"),
    ({"node_labels": np.arange(20) % 3 - 1}, "labels out of range: found -1..1"),
    ({"node_features": nan_features()}, "x has NaN or infinite values in 1 nodes (first: node 4)"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_bad_files_name_the_problem(tmp_path, change, message):
    write(tmp_path, **change)
    with pytest.raises(DataError) as err:
        load_heterophilous(tmp_path, "tiny")
    assert message in str(err.value)


@pytest.mark.parametrize("change,message", BAD)
def test_bad_files_fail_the_cli_cleanly(tmp_path, change, message):
    write(tmp_path, **change)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"name": "t", "task": {"name": "heterophilous", "dataset": "tiny"},
                                      "space": {"name": "hetero-baseline"},
                                      "strategy": {"name": "fixed", "arch": {"model": "mlp"}}}))
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["search", str(recipe), "--out", str(out), "--data-dir", str(tmp_path)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and message in lines[0], r.output
    assert not out.exists()


def test_missing_file_and_pickled_arrays_are_refused(tmp_path):
    with pytest.raises(DataError, match="missing nope.npz"):
        load_heterophilous(tmp_path, "nope")
    write(tmp_path, node_labels=np.array([object()] * 20))
    with pytest.raises(DataError, match="not a readable .npz of plain arrays"):
        load_heterophilous(tmp_path, "tiny")
