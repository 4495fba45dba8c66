"""Straightforward per-graph reference of D-VAE's encoder and teacher-forced decoder.

Follows D-VAE's procedure literally (Zhang et al., NeurIPS 2019, "D-VAE: A Variational
Autoencoder for Directed Acyclic Graphs", Sec. 3: one graph, one vertex, one candidate edge at
a time, recomputing the new vertex's state after every decision), as the graph VAEs of
Chatzianastasis et al., 2021 (operation embeddings) use it, with the submodules of a
:class:`~attnas.graphvae.vae.GraphVAE`. The batched implementation is checked against it
(``tests/graphvae/test_dvae_encoder.py``, ``test_decoder.py``, ``test_loss_gradients.py``) and
timed against it (``benchmarks/speed/bench_dvae_epoch.py --reference-steps``). Slow: not used
in training.
"""

from __future__ import annotations

import torch


def _feat(model, x, u):
    if model.config.message_input == "operation":
        return x[u : u + 1]
    return torch.eye(model.max_nodes, dtype=x.dtype)[u : u + 1]


def _gated_sum(gated, model, x, states, nodes, hidden):
    if not nodes:
        return torch.zeros(1, hidden, dtype=x.dtype)
    return sum(gated(torch.cat([states[u], _feat(model, x, u)], -1)) for u in nodes)


def encode_one(model, types: list[int], adj, n: int):
    """(mu, logvar) of one graph, each (1, latent)."""
    enc = model.encoder
    x = model.ops(torch.tensor(types[:n]))
    hs = model.config.hidden
    fwd = {}
    for v in range(n):
        preds = [u for u in range(v) if adj[u][v]]
        fwd[v] = enc.gru_forward(x[v : v + 1], _gated_sum(enc.gated_forward, model, x, fwd, preds, hs))
    hg = fwd[n - 1]
    if enc.bidirectional:
        bwd = {}
        for v in range(n - 1, -1, -1):
            succ = [u for u in range(v + 1, n) if adj[v][u]]
            bwd[v] = enc.gru_backward(x[v : v + 1], _gated_sum(enc.gated_backward, model, x, bwd, succ, hs))
        hg = enc.unify(torch.cat([hg, bwd[0]], -1))
    return enc.fc_mu(hg), enc.fc_logvar(hg)


def log_likelihood_one(model, z, types: list[int], adj, n: int):
    """Teacher-forced log-likelihood of one graph given z (1, latent): D-VAE's loss loop."""
    dec = model.decoder
    x = model.ops(torch.tensor(types[:n]))
    hs = model.config.hidden
    states = {0: dec.gru(x[0:1], torch.tanh(dec.fc_h0(z)))}
    ll = torch.zeros((), dtype=z.dtype)
    for v in range(1, n):
        logp = torch.log_softmax(dec.add_vertex(states[v - 1]), -1)
        ll = ll + logp[0, types[v]]
        connected = []

        def state():
            return dec.gru(x[v : v + 1], _gated_sum(dec.gated, model, x, states, connected, hs))

        h = state()
        for k in range(v - 1, -1, -1):
            p = torch.sigmoid(dec.add_edge(states[k], h))[0]
            ll = ll + (torch.log(p) if adj[k][v] else torch.log1p(-p))
            if adj[k][v]:
                connected.append(k)
            h = state()
        states[v] = h
    return ll
