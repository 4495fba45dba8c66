"""The D-VAE encoder: asynchronous message passing in topological order.

D-VAE (Zhang et al., NeurIPS 2019, Sec. 3.1; the operation-embeddings paper,
Chatzianastasis et al., 2021, Appendix A, Eqs. 4-11): vertices
are processed one at a time in a topological order; vertex ``u`` aggregates the gated
messages of its (already processed) predecessors and updates its state with a GRU::

    h_u^in = sum_{v -> u} g(Cat(h_v, x_v)) * m(Cat(h_v, x_v))         (Eq. 6 / 10)
    h_u    = GRU(x_u, h_u^in)            (x_u = O(x_u) with embeddings, Eq. 7 / 11)

The graph state is the state of the output vertex; with the bidirectional option a
second pass runs in reverse topological order (messages from successors, its own GRU
and gates) and the graph state is a linear map of ``Cat(h_out^fwd, h_in^bwd)``. Two linear
layers give the posterior mean and log-variance (Eqs. 2a-2b / 3a-3b).

Batching: the vertices of one topological level (longest-path depth), in every graph of the
batch, are updated by one tensor operation (a GRU call on all of them), not one call per
graph or per vertex. A vertex's message depends on that vertex only, so it is computed
once; the sum over predecessors is a batched product with the adjacency column. ENAS
DAGs (8 nodes, a chain through all of them) have one vertex per level; DAGs such as
AutoAttend's have several, and need fewer sequential steps than vertices. Padding
vertices get no state.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.graphvae.aggregation import GatedSum, aggregate, descriptor_features
from attnas.graphvae.gru import gru_cell, gru_from_zero
from attnas.graphvae.step_products import step_linear


class DVAEEncoder(nn.Module):
    """D-VAE's asynchronous GRU encoder (Chatzianastasis et al., 2021, Eqs. 4-11; D-VAE Sec. 3.1).

    Args:
        x_dim: Size of the operation features (one-hot size or ``d_op``).
        hidden: Hidden state size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        max_nodes: Largest node count the model handles (size of the vertex-index one-hot).
        bidirectional: Add the reverse-order pass (D-VAE's ENAS setting).
        message_input: ``"vertex_id"`` (public D-VAE code) or ``"operation"`` (Eq. 6 as
            printed), see :func:`~attnas.graphvae.aggregation.descriptor_features`.

    Each direction runs through :meth:`propagate`, index by index on chains in index order
    (each vertex its own level, as in ENAS's DAGs) and level by level on other DAGs.

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
        """Posterior mean and log-variance of every graph (Chatzianastasis et al., 2021, Eqs. 2a-2b / 3a-3b).

        The graph state is the output vertex's forward state; with ``bidirectional`` it is
        ``unify(Cat(h_out^fwd, h_in^bwd))``.
        """
        feats = descriptor_features(self.message_input, x, self.max_nodes)
        adj_f = adj.to(x.dtype)
        b = x.shape[0]
        rows = torch.arange(b, device=x.device)
        if self.bidirectional:
            states, back = self.sweeps(x, feats, adj_f, n_nodes)
            hg = states[rows, n_nodes - 1]  # the output vertex of every graph
            return self._head(torch.cat([hg, back[:, 0]], -1))  # with the input vertex's backward state
        return self._head(self.propagate(x, feats, adj_f, reverse=False, n_nodes=n_nodes)[rows, n_nodes - 1])

    def sweeps(self, x: Tensor, feats: Tensor, adj: Tensor, n_nodes: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The forward and the reverse sweep of the bidirectional encoder (Eqs. 6-7 / 10-11).

        Returns:
            The forward and the backward state of every vertex, ``(B, N, hidden)`` each.
        """
        return (self.propagate(x, feats, adj, reverse=False, n_nodes=n_nodes),
                self.propagate(x, feats, adj, reverse=True, n_nodes=n_nodes))

    def _head(self, hg: Tensor) -> tuple[Tensor, Tensor]:
        """``(mu, logvar)`` from the graph state (Chatzianastasis et al., 2021, Eqs. 2a-2b / 3a-3b)."""
        if self.bidirectional:
            hg = self.unify(hg)
        return self.fc_mu(hg), self.fc_logvar(hg)

    def propagate(self, x: Tensor, feats: Tensor, adj: Tensor, reverse: bool, n_nodes: Tensor | None = None) -> Tensor:
        """One sweep of the message passing in (reverse) topological order (Chatzianastasis et al., 2021,
        Eqs. 6-7 / 10-11).

        A vertex's level is the length of the longest path reaching it (from a source in the
        forward sweep, from a sink in the reverse one), so every vertex of a level has all
        its predecessors (successors) in earlier levels, and the vertices of one level, in
        every graph of the batch, are updated by one GRU call. When every level is one
        vertex index (chains such as ENAS's DAGs) the sweep goes index by index on views of
        the batch, which is the same computation without gathering and scattering rows.

        Args:
            x: Operation features, ``(B, N, x_dim)``.
            feats: Message descriptor features, ``(B, N, F)``
                (:func:`~attnas.graphvae.aggregation.descriptor_features`).
            adj: Float adjacency, ``adj[b, u, v]`` = edge ``u -> v``, ``(B, N, N)``.
            reverse: Sweep from the sinks (messages from successors, the backward modules).
            n_nodes: Real vertex counts; padding vertices get no state (zeros). None: all.

        Returns:
            The state of every vertex, ``(B, N, hidden)``.
        """
        b, n, _ = x.shape
        if self.index_order(adj, n_nodes, reverse):
            return self._sweep_by_index(x, feats, adj, reverse)
        real = torch.ones(b, n, dtype=torch.bool, device=x.device)
        if n_nodes is not None:
            real = torch.arange(n, device=x.device).unsqueeze(0) < n_nodes.unsqueeze(1)
        return self._sweep_by_level(x, feats, adj, reverse, topological_levels(adj, reverse), real)

    @staticmethod
    def index_order(adj: Tensor, n_nodes: Tensor | None, reverse: bool) -> bool:
        """Whether every level is one vertex index in every graph (no padding; chains such as ENAS's)."""
        b, n, _ = adj.shape
        if n_nodes is not None and not bool((n_nodes == n).all()):
            return False
        index = torch.arange(n, device=adj.device).unsqueeze(0)
        return bool((topological_levels(adj, reverse) == (n - 1 - index if reverse else index)).all())

    def _sweep_by_level(self, x: Tensor, feats: Tensor, adj: Tensor, reverse: bool, level: Tensor,
                        real: Tensor) -> Tensor:
        """One direction's sweep, one GRU call per topological level (Chatzianastasis et al., 2021, Eqs. 6-7 / 10-11).

        Args:
            x: Operation features, ``(B, N, x_dim)``.
            feats: Message descriptor features, ``(B, N, F)``.
            adj: Float adjacency, ``(B, N, N)``.
            reverse: Sweep from the sinks (messages from successors, the backward modules).
            level: :func:`topological_levels` of ``adj``, ``(B, N)``.
            real: Which vertices are not padding, ``(B, N)`` bool.

        Returns:
            The state of every vertex, ``(B, N, hidden)`` (zeros for padding).
        """
        gru = self.gru_backward if reverse else self.gru_forward
        gated = self.gated_backward if reverse else self.gated_forward
        b, n, _ = x.shape
        sends = (adj != 0).any(1 if reverse else 2)  # (B, N): vertices with someone to send to
        states = x.new_zeros(b, n, self.hidden)
        messages = x.new_zeros(b, n, self.hidden)
        for lev in range(int(level[real].max()) + 1 if bool(real.any()) else 0):
            bi, vi = ((level == lev) & real).nonzero(as_tuple=True)
            if lev == 0:  # no vertex can send a message to a source: GRU(x, 0)
                h = gru_from_zero(gru, x[bi, vi])
            else:
                weights = adj[bi, vi, :] if reverse else adj[bi, :, vi]  # (R, N): successors / predecessors
                h = gru(x[bi, vi], aggregate(weights, messages[bi]))
            h = h.to(states.dtype)  # bf16 autocast: the states stay in the input's dtype
            states = states.index_put((bi, vi), h)
            out = sends[bi, vi]
            if bool(out.any()):
                bo, vo = bi[out], vi[out]
                messages = messages.index_put((bo, vo), gated(torch.cat([h[out], feats[bo, vo]], -1)).to(messages.dtype))
        return states

    def _sweep_by_index(self, x: Tensor, feats: Tensor, adj: Tensor, reverse: bool) -> Tensor:
        """One direction's sweep, vertex index by vertex index (Chatzianastasis et al., 2021, Eqs. 6-7 / 10-11).

        Valid when the vertex numbering is a topological order. The GRU's input products of
        every vertex are one call before the loop; the recurrent and gated-sum products go
        through :func:`~attnas.graphvae.step_products.step_linear`.

        Args:
            x: Operation features, ``(B, N, x_dim)``.
            feats: Message descriptor features, ``(B, N, F)``.
            adj: Float adjacency, ``(B, N, N)``.
            reverse: Sweep from the last vertex (messages from successors, the backward modules).

        Returns:
            The state of every vertex, ``(B, N, hidden)``.
        """
        gru = self.gru_backward if reverse else self.gru_forward
        gated = self.gated_backward if reverse else self.gated_forward
        n = x.shape[1]
        states: list[Tensor | None] = [None] * n
        messages: list[Tensor | None] = [None] * n
        order = range(n - 1, -1, -1) if reverse else range(n)
        last = order[-1]
        gi = F.linear(x, gru.weight_ih, gru.bias_ih)  # (B, N, 3H): every vertex's input product at once
        hh = step_linear(gru.weight_hh, gru.bias_hh)
        msg = step_linear(*gated.fused())
        for v in order:
            done = list(range(v + 1, n)) if reverse else list(range(v))
            if done:
                weights = adj[:, v, v + 1 :] if reverse else adj[:, :v, v]  # successors / predecessors of v
                s = aggregate(weights, torch.stack([messages[u] for u in done], 1))
                h = gru_cell(gi[:, v], hh(s), s)
            else:  # no vertex can send a message yet: GRU(x, 0)
                h = gru_from_zero(gru, x[:, v])
            states[v] = h
            if v != last:  # the last vertex of the sweep has no one to send to
                messages[v] = GatedSum.from_fused(msg(torch.cat([h, feats[:, v]], -1)))
        return torch.stack(states, 1)  # type: ignore[arg-type]


def topological_levels(adj: Tensor, reverse: bool = False) -> Tensor:
    """Longest-path depth of every vertex: 0 for sources (sinks with ``reverse``).

    Vertices are numbered in a topological order (edges go from lower to higher index).

    Shapes:
        - **adj**: ``(B, N, N)``, nonzero ``adj[b, u, v]`` = edge ``u -> v``
        - **output**: ``(B, N)`` int64
    """
    b, n, _ = adj.shape
    edges = adj != 0
    level = torch.zeros(b, n, dtype=torch.long, device=adj.device)
    order = range(n - 1, -1, -1) if reverse else range(n)
    for v in order:
        near = edges[:, v, :] if reverse else edges[:, :, v]  # successors / predecessors of v
        if bool(near.any()):
            cand = torch.where(near, level + 1, torch.zeros_like(level))
            level[:, v] = cand.max(1).values
    return level
