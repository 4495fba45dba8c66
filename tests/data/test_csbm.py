"""The contextual SBM: deterministic, the degree and the homophily phi asks for."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.data.csbm import csbm_graph, csbm_parameters, load_csbm


def homophily(y, ei):
    return (y[ei[0]] == y[ei[1]]).float().mean().item()


def test_parameters_satisfy_the_threshold_equation_and_phi():
    import math

    for phi in (-1, -0.5, 0, 0.25, 1):
        lam, mu = csbm_parameters(phi, 3.25, 400, 100)
        assert math.isclose(lam ** 2 + mu ** 2 / 4, 4.25)
        assert math.isclose(2 / math.pi * math.atan2(lam * 2, mu), phi, abs_tol=1e-9)


def test_graph_is_deterministic_with_the_asked_degree_and_homophily():
    x, y, ei = csbm_graph(n=400, p=100, phi=-1.0, seed=3)
    x2, _, ei2 = csbm_graph(n=400, p=100, phi=-1.0, seed=3)
    assert torch.equal(x, x2) and torch.equal(ei, ei2)
    assert x.shape == (400, 100) and y.tolist() == [0] * 200 + [1] * 200
    assert 4.0 < ei.size(1) / 400 < 6.0  # average degree d = 5
    assert homophily(y, ei) < 0.15  # phi = -1: c_in = 5 - sqrt(5 * 4.25) = 0.39, c_out = 9.61
    _, y, ei = csbm_graph(n=400, p=100, phi=1.0, seed=3)
    assert homophily(y, ei) > 0.85
    _, y, ei = csbm_graph(n=400, p=100, phi=0.0, seed=3)
    assert 0.35 < homophily(y, ei) < 0.65


def test_ten_dense_splits_and_impossible_settings():
    ds = load_csbm(n=200, p=20, phi=0.5, seed=1)
    masks = ds.graph.split_masks
    assert masks["train"].shape == (10, 200) and masks["train"].sum(1).tolist() == [120] * 10
    assert masks["val"].sum(1).tolist() == [40] * 10 and not (masks["train"] & masks["test"]).any()
    with pytest.raises(ConfigError, match="beyond sqrt"):
        csbm_graph(n=200, p=20, d=1.0, phi=1.0)
