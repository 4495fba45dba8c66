"""Table-1 metrics: same-DAG test, validity/uniqueness/novelty counting, prior sampling."""

from __future__ import annotations

import torch
from dag_factory import random_dags

from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.metrics import prior_samples, reconstruction_accuracy, same_dag, validity_uniqueness
from attnas.graphvae.validity import is_valid_dag
from attnas.graphvae.vae import GraphVAE, GraphVAEConfig


def test_same_dag():
    a = random_dags(4, 6, 5, seed=0)
    b = a.index([0, 1, 2, 3])
    b.adj = b.adj.clone()
    b.adj[1, 0, 5] = ~b.adj[1, 0, 5]
    b.types = b.types.clone()
    b.types[2, 1] = 4 if int(b.types[2, 1]) != 4 else 3
    assert same_dag(a, b).tolist() == [True, False, False, True]
    assert bool(same_dag(a.index([0]), a.index([0]).pad_to(8))[0])


def test_validity_uniqueness_novelty_counts():
    g = random_dags(3, 5, 5, seed=1)
    bad = g.index([0])
    bad.types = bad.types.clone()
    bad.types[0, 1] = 0  # a second input vertex: invalid
    samples = DagBatch.cat([g.index([0, 0, 1, 2]), bad])
    out = validity_uniqueness(samples, is_valid_dag, train_keys=set(g.index([0]).keys()))
    assert out["validity"] == 4 / 5
    assert out["uniqueness"] == 3 / 4
    assert out["novelty"] == 2 / 4


def test_prior_samples_count_and_scaling():
    torch.manual_seed(0)
    model = GraphVAE(GraphVAEConfig(hidden=8, latent=3), 5, 6)
    z_train = torch.randn(50, 3) * 0.1 + 5
    s = prior_samples(model, n_points=7, decode_times=3, train_latents=z_train, batch_size=4, generator=torch.Generator().manual_seed(0))
    assert len(s) == 21 and s.max_nodes == 6


def test_reconstruction_accuracy_counts_exact_matches():
    truth = random_dags(4, 6, 5, seed=0)

    class Stub(torch.nn.Module):  # decodes graph 0 wrongly every other call, the rest exactly
        calls = 0

        def encode(self, batch):
            return torch.zeros(len(batch), 2), torch.zeros(len(batch), 2)

        def reparameterize(self, mu, logvar, generator=None):
            return mu

        def decode(self, z, generator=None):
            Stub.calls += 1
            out = truth.index(slice(0, len(z)))
            if Stub.calls % 2:
                out.types = out.types.clone()
                out.types[0, 1] = 0
            return out

    acc = reconstruction_accuracy(Stub(), truth, encode_times=2, decode_times=3, batch_size=4)
    assert acc == (4 * 6 - 3) / (4 * 6)
