"""The batched D-VAE encoder against D-VAE's per-graph procedure."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags
from reference_dvae import encode_one

from attnas.graphvae.aggregation import descriptor_features
from attnas.graphvae.dvae_encoder import DVAEEncoder
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
    states = enc.propagate(x, feats, batch.adj.float(), reverse=False)
    assert len(states) == 6 and states[0].shape == (4, 7)


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
