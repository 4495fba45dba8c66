"""The batched D-VAE encoder against D-VAE's per-graph procedure."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.graphvae.aggregation import descriptor_features
from attnas.graphvae.dvae_encoder import DVAEEncoder
from attnas.graphvae.reference_dvae import encode_one
from attnas.graphvae.vae import GraphVAE, GraphVAEConfig


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("message_input", ["vertex_id", "operation"])
@pytest.mark.parametrize("operations", ["onehot", "embedding"])
def test_batched_encoder_equals_per_graph_reference(bidirectional, message_input, operations):
    torch.manual_seed(0)
    cfg = GraphVAEConfig(hidden=10, latent=3, bidirectional=bidirectional, message_input=message_input, operations=operations)
    model = GraphVAE(cfg, 6, 7).double()
    batch = random_dags(8, max_nodes=7, num_types=6, seed=4)  # variable node counts, padded
    with torch.no_grad():
        mu, logvar = model.encode(batch)
        for i in range(len(batch)):
            rmu, rlv = encode_one(model, batch.types[i].tolist(), batch.adj[i].tolist(), int(batch.n_nodes[i]))
            assert torch.allclose(mu[i], rmu[0], atol=1e-12)
            assert torch.allclose(logvar[i], rlv[0], atol=1e-12)


def test_shapes_and_state_count():
    enc = DVAEEncoder(x_dim=5, hidden=7, latent=3, max_nodes=6)
    batch = random_dags(4, max_nodes=6, num_types=5, seed=0)
    x = torch.randn(4, 6, 5)
    mu, logvar = enc(x, batch.adj, batch.n_nodes)
    assert mu.shape == (4, 3) and logvar.shape == (4, 3)
    feats = descriptor_features("vertex_id", x, 6)
    states = enc.propagate(x, feats, batch.adj.float(), reverse=False, n_nodes=batch.n_nodes)
    assert states.shape == (4, 6, 7)
    padding = torch.arange(6).unsqueeze(0) >= batch.n_nodes.unsqueeze(1)
    assert bool((states[padding] == 0).all())  # padding vertices get no state


def test_encoder_sees_edges_and_types():
    torch.manual_seed(0)
    model = GraphVAE(GraphVAEConfig(hidden=8, latent=3), 6, 5)
    batch = random_dags(1, max_nodes=5, num_types=6, seed=0, min_nodes=5)
    other_types = batch.index([0])
    other_types.types = other_types.types.clone()
    other_types.types[0, 2] = 2 if int(batch.types[0, 2]) != 2 else 3
    mu0, _ = model.encode(batch)
    mu1, _ = model.encode(other_types)
    assert not torch.allclose(mu0, mu1)


def test_topological_levels_are_longest_path_depths():
    from attnas.graphvae.dvae_encoder import topological_levels

    # 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3, 0 -> 3, 3 -> 4; vertex 5 is isolated
    adj = torch.zeros(1, 6, 6)
    for u, v in [(0, 1), (0, 2), (1, 3), (2, 3), (0, 3), (3, 4)]:
        adj[0, u, v] = 1
    assert topological_levels(adj).tolist() == [[0, 1, 1, 2, 3, 0]]
    assert topological_levels(adj, reverse=True).tolist() == [[3, 2, 2, 1, 0, 0]]


def test_chain_dags_take_the_index_sweep_and_it_equals_the_level_sweep():
    from attnas.graphvae.dvae_encoder import topological_levels

    torch.manual_seed(0)
    enc = DVAEEncoder(x_dim=5, hidden=7, latent=3, max_nodes=6).double()
    batch = random_dags(5, max_nodes=6, num_types=5, seed=1, min_nodes=6)
    adj = batch.adj.clone()
    idx = torch.arange(5)
    adj[:, idx, idx + 1] = True  # a chain through every vertex, as in ENAS: one vertex per level
    x = torch.randn(5, 6, 5, dtype=torch.float64)
    feats = descriptor_features("vertex_id", x, 6)
    real = torch.ones(5, 6, dtype=torch.bool)
    for reverse in (False, True):
        level = topological_levels(adj, reverse)
        by_index = enc._sweep_by_index(x, feats, adj.double(), reverse)
        by_level = enc._sweep_by_level(x, feats, adj.double(), reverse, level, real)
        assert torch.allclose(by_index, by_level, atol=1e-12)
        assert torch.equal(enc.propagate(x, feats, adj.double(), reverse), by_index)
