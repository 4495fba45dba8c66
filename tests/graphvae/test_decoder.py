"""The batched teacher-forced decoder against D-VAE's per-graph procedure, and sampling."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.graphvae.dag_batch import END_TYPE, START_TYPE
from attnas.graphvae.decoder import DagDecoder, EdgeScorer
from attnas.graphvae.reference_dvae import log_likelihood_one
from attnas.graphvae.validity import is_valid_dag
from attnas.graphvae.vae import GraphVAE, GraphVAEConfig


def _model(message_input="vertex_id", operations="onehot", max_nodes=7, num_types=6):
    torch.manual_seed(0)
    cfg = GraphVAEConfig(hidden=12, latent=4, operations=operations, message_input=message_input)
    return GraphVAE(cfg, num_types, max_nodes).double()


@pytest.mark.parametrize("message_input", ["vertex_id", "operation"])
@pytest.mark.parametrize("operations", ["onehot", "embedding"])
def test_batched_log_likelihood_equals_per_graph_reference(message_input, operations):
    model = _model(message_input, operations)
    batch = random_dags(9, max_nodes=7, num_types=6, seed=1)  # variable sizes, padded to 7
    z = torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        type_ll, edge_ll = model.decoder.log_likelihood(z, model.ops, batch)
    for i in range(len(batch)):
        n = int(batch.n_nodes[i])
        with torch.no_grad():
            ref = log_likelihood_one(model, z[i : i + 1], batch.types[i].tolist(), batch.adj[i].tolist(), n)
        assert float(type_ll[i] + edge_ll[i]) == pytest.approx(float(ref), abs=1e-10)


def test_padding_does_not_change_a_graphs_likelihood():
    model = _model()
    batch = random_dags(4, max_nodes=5, num_types=6, seed=3)
    z = torch.randn(4, 4, dtype=torch.float64)
    a = sum(model.decoder.log_likelihood(z, model.ops, batch))
    b = sum(model.decoder.log_likelihood(z, model.ops, batch.pad_to(7)))
    assert torch.allclose(a, b, atol=1e-12)


def test_edge_scorer_is_an_mlp_on_the_concatenation():
    torch.manual_seed(0)
    scorer = EdgeScorer(5)
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    w, bias = scorer.first_layer()
    assert w.shape == (20, 10)
    expected = scorer.fc2(torch.relu(torch.cat([a, b], -1) @ w.T + bias)).squeeze(-1)
    assert torch.allclose(scorer(a, b), expected, atol=1e-6)
    assert float(w.abs().max()) <= 1 / 10**0.5  # initialised as nn.Linear(2H, 4H)


def test_sampled_graphs_are_well_formed_and_reproducible():
    model = _model().float()
    z = torch.randn(64, 4)
    g1 = model.decode(z, generator=torch.Generator().manual_seed(5))
    g2 = model.decode(z, generator=torch.Generator().manual_seed(5))
    assert torch.equal(g1.types, g2.types) and torch.equal(g1.adj, g2.adj)
    assert not torch.tril(g1.adj).any()
    assert torch.all(g1.types[:, 0] == START_TYPE)
    last = g1.types[torch.arange(64), g1.n_nodes - 1]
    assert torch.all(last == END_TYPE)
    mask = g1.node_mask()
    assert not (g1.adj & ~mask.unsqueeze(1)).any() and not (g1.adj & ~mask.unsqueeze(2)).any()
    # every vertex before the output has a successor: loose ends are wired to the output
    for adj, types in g1.graphs():
        n = len(types)
        assert all(adj[u].any() for u in range(n - 1))


def test_deterministic_decoding_takes_the_likeliest_choices():
    model = _model().float()
    z = torch.randn(16, 4)
    a = model.decode(z, stochastic=False)
    b = model.decode(z, stochastic=False)
    assert torch.equal(a.adj, b.adj) and torch.equal(a.types, b.types)


def test_decoded_types_can_be_invalid_but_validity_is_checked():
    model = _model().float()
    g = model.decode(torch.randn(200, 4), generator=torch.Generator().manual_seed(0))
    valid = is_valid_dag(g)
    assert valid.dtype == torch.bool and valid.shape == (200,)


def test_two_node_decoder_generates_input_to_output():
    dec = DagDecoder(num_types=4, max_nodes=2, hidden=6, latent=3, x_dim=4)
    from attnas.graphvae.op_encoding import OperationEncoding

    g = dec.sample(torch.randn(5, 3), OperationEncoding(4))
    assert torch.all(g.n_nodes == 2) and torch.all(g.adj[:, 0, 1])
