"""The ENAS 6-layer loader against the facts in shared/data/SOURCES.md, section 4."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from attnas import registry
from attnas.data.enas import (
    VOCAB,
    dag_to_rows,
    flat_string,
    load_enas6,
    parse_line,
    rows_to_dag,
)
from attnas.core.errors import DataError


@pytest.fixture(scope="module")
def enas():
    root = os.environ.get("ATTNAS_DATA")  # tests/conftest.py points it at ../shared/data
    if not root or not (Path(root) / "enas" / "final_structures6.txt").exists():
        pytest.skip("real ENAS data not available (set ATTNAS_DATA)")
    return load_enas6(root)


def test_counts_and_split_match_dvae(enas):
    assert len(enas.rows) == 19020
    assert len(enas.train) == 17118 and len(enas.test) == 1902
    expected = list(range(19020))
    random.Random(0).shuffle(expected)  # D-VAE shuffles its graph list with random.Random(0)
    assert enas.order == expected


def test_values_range_and_mean(enas):
    y = torch.cat([enas.train.y, enas.test.y]).double()
    assert float(y.min()) == pytest.approx(0.702, abs=1e-6)
    assert float(y.max()) == pytest.approx(0.7502, abs=1e-6)
    assert float(y.mean()) == pytest.approx(0.7363, abs=5e-5)


def test_vertex_types_and_structure(enas):
    g = enas.all.graphs
    assert enas.train.vocab == VOCAB and len(VOCAB) == 8
    assert torch.all(g.n_nodes == 8)
    assert torch.all(g.types[:, 0] == 0) and torch.all(g.types[:, 7] == 1)
    inner = g.types[:, 1:7]
    assert int(inner.min()) == 2 and int(inner.max()) == 7
    # every layer takes the edge from the vertex before it; the output only from the last layer
    assert torch.all(g.adj[:, torch.arange(7), torch.arange(1, 8)])
    assert torch.all(g.adj[:, :, 7].sum(1) == 1)
    assert not torch.tril(g.adj).any()


def test_distinct_architectures(enas):
    assert len(set(enas.all.graphs.keys())) == 19015


def test_rows_follow_the_file_and_its_order(enas):
    # graph i of the training split is file line (1000 + order[i] + 1)
    rows = enas.rows[enas.order[0]]
    adj, types = rows_to_dag(rows)
    assert types == enas.train.graphs.types[0].tolist()
    assert np.array_equal(adj.astype(bool), enas.train.graphs.adj[0].numpy())


def test_sources_example_line():
    rows, acc = parse_line("[[1], [4, 0], [5, 0, 0], [0, 1, 1, 1], [2, 1, 1, 1, 1], [3, 0, 0, 0, 0, 1]], 0.7302", 1)
    assert acc == pytest.approx(0.7302)
    adj, types = rows_to_dag(rows)
    assert types == [0, 3, 6, 7, 2, 4, 5, 1]
    edges = {(int(u), int(v)) for u, v in zip(*np.nonzero(adj))}
    chain = {(k, k + 1) for k in range(7)}
    # layer 3 (vertex 4): flags 1,1,1 -> from vertices 0,1,2; layer 4 (vertex 5): from 0..3;
    # layer 5 (vertex 6): only its last flag -> from vertex 4
    extra = {(0, 4), (1, 4), (2, 4), (0, 5), (1, 5), (2, 5), (3, 5), (4, 6)}
    assert edges == chain | extra
    assert dag_to_rows(adj, types) == rows
    assert flat_string(rows) == "1 4 0 5 0 0 0 1 1 1 2 1 1 1 1 3 0 0 0 0 1"


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("[[1], [4, 0]] 0.7", "expected"),
        ("[[1], [4, 0, 1]], 0.7", "layer 1 must be a list of 2"),
        ("[[9], [4, 0]], 0.7", "operation id 9"),
        ("[[1], [4, 2]], 0.7", "skip flag"),
        ("[[1], [4, 0]], \"x\"", "not a number"),
    ],
)
def test_malformed_line_names_line_number(line, fragment):
    with pytest.raises(DataError, match=rf"line 17: .*{fragment}"):
        parse_line(line, 17)


def test_malformed_line_in_file_reports_its_number(tmp_path):
    folder = tmp_path / "enas"
    folder.mkdir()
    good = "[[1], [4, 0], [5, 0, 0]], 0.71\n"
    (folder / "final_structures6.txt").write_text(good * 3 + "[[1], [4, 0], [5, 0]], 0.72\n" + good)
    with pytest.raises(DataError, match="line 4"):
        load_enas6(tmp_path, burn_in=0)


def test_small_file_loads_and_splits(tmp_path):
    folder = tmp_path / "enas"
    folder.mkdir()
    lines = [f"[[{i % 6}], [{(i + 1) % 6}, {i % 2}]], 0.7{i}\n" for i in range(10)]
    (folder / "final_structures6.txt").write_text("".join(lines))
    data = load_enas6(tmp_path, burn_in=2)
    assert len(data.train) + len(data.test) == 8
    assert len(data.train) == int(8 * 0.9)
    assert data.train.max_nodes == 4


def test_missing_file_names_it(tmp_path):
    with pytest.raises(DataError, match=r"final_structures6\.txt.*enas"):
        load_enas6(tmp_path)


def test_registered():
    assert registry.get("dataset", "enas6") is load_enas6


def test_dag_to_rows_rejects_non_enas():
    adj = np.zeros((4, 4), dtype=np.uint8)
    adj[0, 1] = adj[1, 3] = 1
    with pytest.raises(DataError, match="layer 1 lacks"):
        dag_to_rows(adj, [0, 2, 3, 1])
    with pytest.raises(DataError, match="vertex types"):
        dag_to_rows(adj, [0, 0, 3, 1])
