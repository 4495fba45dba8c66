"""The D-VAE encoder: asynchronous message passing in topological order.

D-VAE (Zhang et al., NeurIPS 2019, Sec. 3.1; paper 004, Appendix A, Eqs. 4-11): vertices
are processed one at a time in a topological order; vertex ``u`` aggregates the gated
messages of its (already processed) predecessors and updates its state with a GRU::

    h_u^in = sum_{v -> u} g(Cat(h_v, x_v)) * m(Cat(h_v, x_v))         (Eq. 6 / 10)
    h_u    = GRU(x_u, h_u^in)            (x_u = O(x_u) with embeddings, Eq. 7 / 11)

The graph state is the state of the output vertex; with the bidirectional option a
second pass runs in reverse topological order (messages from successors, its own GRU
and gates) and the graph state is a linear map of ``Cat(h_out^fwd, h_in^bwd)``. Two linear
layers give the posterior mean and log-variance (Eqs. 2a-2b / 3a-3b).

Batching: all graphs' nodes are numbered in a topological order, so vertex index ``v``
of every graph in the batch is processed by one tensor operation (a GRU call on ``B``
rows), not one call per graph. A vertex's message depends on that vertex only, so it is
computed once; the sum over predecessors is a batched product with the adjacency
column. ENAS DAGs (8 nodes, fixed order) need no padding; other DAGs are padded, and a
padding node has no edges, so it never sends a message to a real node.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from attnas.graphvae.aggregation import GatedSum, aggregate, descriptor_features
from attnas.graphvae.gru import gru_from_zero


class DVAEEncoder(nn.Module):
    """D-VAE's asynchronous GRU encoder (paper 004, Eqs. 4-11; D-VAE Sec. 3.1).

    Args:
        x_dim: Size of the operation features (one-hot size or ``d_op``).
        hidden: Hidden state size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        max_nodes: Largest node count the model handles (size of the vertex-index one-hot).
        bidirectional: Add the reverse-order pass (D-VAE's ENAS setting).
        message_input: ``"vertex_id"`` (public D-VAE code) or ``"operation"`` (Eq. 6 as
            printed), see :func:`~attnas.graphvae.aggregation.descriptor_features`.

    Shapes:
        - **x**: ``(B, N, x_dim)`` operation features
        - **adj**: ``(B, N, N)`` bool, ``adj[b, u, v]`` = edge ``u -> v``
        - **n_nodes**: ``(B,)`` int64
        - **output**: ``(mu, logvar)``, each ``(B, latent)``
    """

    def __init__(
        self,
        x_dim: int,
        hidden: int,
        latent: int,
        max_nodes: int,
        bidirectional: bool = True,
        message_input: Literal["vertex_id", "operation"] = "vertex_id",
    ):
        super().__init__()
        self.hidden = hidden
        self.max_nodes = max_nodes
        self.bidirectional = bidirectional
        self.message_input = message_input
        feat = max_nodes if message_input == "vertex_id" else x_dim
        self.gru_forward = nn.GRUCell(x_dim, hidden)
        self.gated_forward = GatedSum(hidden + feat, hidden)
        if bidirectional:
            self.gru_backward = nn.GRUCell(x_dim, hidden)
            self.gated_backward = GatedSum(hidden + feat, hidden)
            self.unify = nn.Linear(2 * hidden, hidden)
        self.fc_mu = nn.Linear(hidden, latent)
        self.fc_logvar = nn.Linear(hidden, latent)

    def forward(self, x: Tensor, adj: Tensor, n_nodes: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and log-variance of every graph."""
        feats = descriptor_features(self.message_input, x, self.max_nodes)
        adj_f = adj.to(x.dtype)
        states = self.propagate(x, feats, adj_f, reverse=False)
        b = x.shape[0]
        rows = torch.arange(b, device=x.device)
        hg = torch.stack(states, 1)[rows, n_nodes - 1]  # the output vertex of every graph
        if self.bidirectional:
            back = self.propagate(x, feats, adj_f, reverse=True)
            hg = self.unify(torch.cat([hg, back[0]], -1))  # with the input vertex's backward state
        return self.fc_mu(hg), self.fc_logvar(hg)

    def propagate(self, x: Tensor, feats: Tensor, adj: Tensor, reverse: bool) -> list[Tensor]:
        """One sweep over the vertices in (reverse) topological order.

        Returns:
            The state of every vertex index, a list of ``N`` tensors ``(B, hidden)``.
        """
        gru = self.gru_backward if reverse else self.gru_forward
        gated = self.gated_backward if reverse else self.gated_forward
        b, n, _ = x.shape
        states: list[Tensor | None] = [None] * n
        messages: list[Tensor | None] = [None] * n
        order = range(n - 1, -1, -1) if reverse else range(n)
        last = order[-1]
        for v in order:
            if reverse:
                done = list(range(v + 1, n))
                weights = adj[:, v, v + 1 :]  # successors of v
            else:
                done = list(range(v))
                weights = adj[:, :v, v]  # predecessors of v
            if done:
                h = gru(x[:, v], aggregate(weights, torch.stack([messages[u] for u in done], 1)))
            else:  # no vertex can send a message yet: GRU(x, 0)
                h = gru_from_zero(gru, x[:, v])
            states[v] = h
            if v != last:  # the last vertex of the sweep has no one to send to
                messages[v] = gated(torch.cat([h, feats[:, v]], -1))
        return states  # type: ignore[return-value]
