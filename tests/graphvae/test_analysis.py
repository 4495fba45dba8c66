"""Graph properties on hand-made DAGs, their correlations, and the t-SNE figure."""

from __future__ import annotations

import numpy as np
import pytest

from attnas.graphvae.analysis import (
    average_path_length,
    clustering_coefficient,
    plot_tsne,
    property_correlations,
)
from attnas.graphvae.dag_batch import DagBatch

CHAIN = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
TRIANGLE = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])
FORK = np.array([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]])  # a square, no triangle


def test_average_path_length_eq12():
    assert average_path_length(CHAIN) == pytest.approx((1 + 2 + 1) / 6)  # unreachable pairs count 0
    assert average_path_length(TRIANGLE) == pytest.approx(3 / 6)
    assert average_path_length(FORK) == pytest.approx((1 + 1 + 2 + 1 + 1) / 12)


def test_clustering_coefficient_ignores_directions():
    assert clustering_coefficient(TRIANGLE) == pytest.approx(1.0)
    assert clustering_coefficient(CHAIN) == 0.0
    assert clustering_coefficient(FORK) == 0.0
    diamond = FORK.copy()
    diamond[1, 2] = 1  # two triangles sharing an edge: 3*2 / (triples = 8)
    assert clustering_coefficient(diamond) == pytest.approx(6 / 8)


def test_property_correlations_signs():
    graphs = DagBatch.from_graphs([(CHAIN, [0, 2, 1]), (TRIANGLE, [0, 2, 1]), (CHAIN, [0, 3, 1]), (TRIANGLE, [0, 3, 1])])
    out = property_correlations(graphs, [0.9, 0.1, 0.8, 0.2])
    assert out["average_path_length_r"] > 0.9 and out["clustering_coefficient_r"] < -0.9


def test_tsne_plot_is_written(tmp_path):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(30, 5))
    path = plot_tsne(z, z[:, 0], tmp_path / "fig" / "tsne.png")
    assert path.exists() and path.stat().st_size > 1000
