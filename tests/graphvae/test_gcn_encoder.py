"""The GCN encoder against the per-vertex formula of D-VAE's directed GCN."""

from __future__ import annotations

import math

import pytest
import torch
from dag_factory import random_dags

from attnas.core.errors import ConfigError
from attnas.graphvae.gcn_encoder import GCNEncoder


def _reference(enc: GCNEncoder, x, adj, n):
    a = adj[:n, :n].to(x.dtype)
    if enc.undirected:
        a = a + a.T
        din = dout = a.sum(0)
    else:
        din, dout = a.sum(0), a.sum(1)
    h = x[:n]
    for conv in enc.convs:
        new = []
        for v in range(n):
            acc = h[v] / (din[v] + 1)
            for u in range(n):
                if a[u, v]:
                    acc = acc + h[u] / math.sqrt((dout[u] + 1) * (din[v] + 1))
            new.append(torch.relu(conv(acc)))
        h = torch.stack(new)
    hg = h[1 : n - 1].sum(0)
    return enc.fc_mu(hg), enc.fc_logvar(hg)


@pytest.mark.parametrize("undirected", [False, True])
def test_gcn_equals_per_vertex_formula(undirected):
    torch.manual_seed(0)
    enc = GCNEncoder(x_dim=4, hidden=6, latent=3, layers=3, undirected=undirected).double()
    batch = random_dags(6, max_nodes=7, num_types=4, seed=2)
    x = torch.randn(6, 7, 4, dtype=torch.float64)
    with torch.no_grad():
        mu, logvar = enc(x, batch.adj, batch.n_nodes)
        for i in range(6):
            rmu, rlv = _reference(enc, x[i], batch.adj[i], int(batch.n_nodes[i]))
            assert torch.allclose(mu[i], rmu, atol=1e-12) and torch.allclose(logvar[i], rlv, atol=1e-12)


def test_gcn_needs_a_layer():
    with pytest.raises(ConfigError, match="at least one layer"):
        GCNEncoder(3, 4, 2, layers=0)
