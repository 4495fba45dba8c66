"""The autoregressive DAG decoder of D-VAE, shared by the D-VAE and GCN encoders.

Paper 004, Sec. 3.2.2 (D-VAE, Zhang et al. 2019, Sec. 3.3). From ``z`` the initial state
is ``h_0 = tanh(W z + b)``; the input vertex gets ``h = GRU(x_start, h_0)``. Then, for
``t = 1, 2, ...``:

1. the type of the new vertex ``u_t`` comes from an MLP on the current graph state (the
   state of the last vertex added): ``softmax(f_add_vertex(h_{u_{t-1}}))``;
2. its state is ``h_{u_t} = GRU(x_{u_t}, h_pred)`` with ``h_pred`` the gated sum of the
   messages of its predecessors so far (none at first);
3. for ``k = t-1, t-2, ..., 0`` an MLP gives ``p_edge = sigmoid(f_add_edge(Cat(h_{u_k},
   h_{u_t})))`` for the edge ``u_k -> u_t``; when the edge is added, step 2 is redone so
   that ``h_{u_t}`` includes the new predecessor.

Generation stops at an output-type vertex, which is connected to every vertex without a
successor; the last possible index is forced to be the output vertex.

Training uses teacher forcing: the true types and edges are fed, so every state the
sequential procedure would visit is known in advance. For vertex ``v`` the state used to
score the edge ``k -> v`` aggregates the true predecessors ``u`` of ``v`` with ``u > k``:
a reverse cumulative sum of the masked messages. All those states (one per candidate
``k``, plus the final one) go through one GRU call for the whole batch, so the loss costs
one batched step per vertex index instead of one per (graph, vertex, candidate edge).
A state only changes when ``k + 1`` is a true predecessor, so only those distinct states
are computed (``dedup=True``), then gathered into place.

Only the final state of each vertex and its message feed later vertices, so the default
``schedule="deferred"`` runs just that recurrence vertex by vertex (32-row products whose
weight gradients :class:`~attnas.graphvae.shared_linear.SharedLinear` computes in one
product) and everything else, for all vertices at once, after the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.graphvae.aggregation import GatedSum, aggregate, descriptor_features
from attnas.graphvae.dag_batch import END_TYPE, START_TYPE, DagBatch
from attnas.graphvae.edge_logits import edge_logits
from attnas.graphvae.gru import fused_gru_cell, gru_cell, gru_from_zero, input_products
from attnas.graphvae.shared_linear import SharedLinear


class EdgeScorer(nn.Module):
    """D-VAE's edge MLP ``f_add_edge(Cat(h_k, h_t))`` (Linear 2H -> 4H, ReLU, Linear 4H -> 1).

    The first layer is linear in the concatenation: ``W [h_k; h_t] + b = W_s h_k + W_d h_t + b``.
    It is stored as its two halves ``W_s`` (source) and ``W_d`` (target, with the bias), so
    the source part is computed once per vertex and the target part once per candidate
    state, without slicing (and zero-filling gradients of) a shared weight. Both halves
    are initialised as the one ``nn.Linear(2H, 4H)`` would be (uniform in
    ``+-1/sqrt(2H)``), so the model is D-VAE's.

    Args:
        hidden: Hidden state size ``H``.

    Shapes:
        - **h_src**, **h_dst**: ``(*, H)``
        - **output**: ``(*)`` edge logits
    """

    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.fc1_src = nn.Linear(hidden, 4 * hidden, bias=False)
        self.fc1_dst = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, 1)
        bound = 1.0 / math.sqrt(2 * hidden)
        for p in (self.fc1_src.weight, self.fc1_dst.weight, self.fc1_dst.bias):
            nn.init.uniform_(p, -bound, bound)

    def forward(self, h_src: Tensor, h_dst: Tensor) -> Tensor:
        """Edge logits of ``h_src -> h_dst`` pairs."""
        return self.combine(self.src_part(h_src), self.dst_part(h_dst))

    def first_layer(self) -> tuple[Tensor, Tensor]:
        """The first layer as one ``(4H, 2H)`` weight on ``Cat(h_src, h_dst)`` and its bias."""
        return torch.cat([self.fc1_src.weight, self.fc1_dst.weight], 1), self.fc1_dst.bias

    def src_part(self, h_src: Tensor) -> Tensor:
        """First-layer contribution of the source state (``(*, 4H)``)."""
        return self.fc1_src(h_src)

    def dst_part(self, h_dst: Tensor) -> Tensor:
        """First-layer contribution of the target state, with the bias (``(*, 4H)``)."""
        return self.fc1_dst(h_dst)

    def combine(self, src: Tensor, dst: Tensor) -> Tensor:
        """Edge logits from the two first-layer parts."""
        return self.fc2(torch.relu(src + dst)).squeeze(-1)


class DagDecoder(nn.Module):
    """D-VAE's autoregressive DAG decoder (paper 004, Sec. 3.2.2).

    Args:
        num_types: Number of vertex types (input and output included).
        max_nodes: Largest number of vertices to generate (the last is forced to be the output).
        hidden: Hidden state size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        x_dim: Size of the operation features fed to the GRU.
        message_input: Vertex descriptor in messages, ``"vertex_id"`` or ``"operation"``.
        dedup: Compute each distinct teacher-forced state once (same result, fewer FLOPs;
            ``schedule="stepwise"`` only: the deferred schedule always does).
        schedule: ``"deferred"`` (default): only the recurrence runs vertex by vertex, the
            rest in large batched calls after the loop; ``"stepwise"``: every term of vertex
            ``v`` is computed at step ``v`` (the round-3 implementation). Same values.
    """

    def __init__(
        self,
        num_types: int,
        max_nodes: int,
        hidden: int,
        latent: int,
        x_dim: int,
        message_input: Literal["vertex_id", "operation"] = "vertex_id",
        dedup: bool = True,
        schedule: Literal["deferred", "stepwise"] = "deferred",
    ):
        super().__init__()
        self.num_types = num_types
        self.max_nodes = max_nodes
        self.hidden = hidden
        self.message_input = message_input
        self.dedup = dedup
        self.schedule = schedule
        # Deferred schedule only. False: round 4's computation (kept for the tests and the benchmark).
        self.fused_edges = True  # the edge MLP as one fused function (attnas.graphvae.edge_logits)
        # Per-vertex slices by one unbind (one gradient stack, not N zero-filled tensors), the GRU
        # step as one autograd function, input products with a (X^T G)^T weight gradient, the
        # teacher-forced rows in the recurrent weight's SharedLinear bank.
        self.layout_tuned = True
        feat = max_nodes if message_input == "vertex_id" else x_dim
        self.fc_h0 = nn.Linear(latent, hidden)
        self.gru = nn.GRUCell(x_dim, hidden)
        self.gated = GatedSum(hidden + feat, hidden)
        self.add_vertex = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.ReLU(), nn.Linear(2 * hidden, num_types))
        self.add_edge = EdgeScorer(hidden)

    # ------------------------------------------------------------------ teacher forcing

    def log_likelihood(self, z: Tensor, encode_ops: Callable[[Tensor], Tensor], batch: DagBatch) -> tuple[Tensor, Tensor]:
        """Teacher-forced log-likelihood of ``batch`` given ``z`` (D-VAE's ``loss``).

        Args:
            z: Latent codes.
            encode_ops: Maps vertex types to operation features (the model's
                :class:`~attnas.graphvae.op_encoding.OperationEncoding`).
            batch: The true graphs.

        Returns:
            ``(type_ll, edge_ll)``: per-graph log-likelihood of the vertex types (vertices
            ``1..n-1``) and of the edge decisions (every ``k < v`` for ``v = 1..n-1``).

        Shapes:
            - **z**: ``(B, latent)``
            - **output**: two ``(B,)`` tensors
        """
        if self.schedule == "deferred":
            return self._log_likelihood_deferred(z, encode_ops, batch)
        return self._log_likelihood_stepwise(z, encode_ops, batch)

    def _log_likelihood_deferred(
        self, z: Tensor, encode_ops: Callable[[Tensor], Tensor], batch: DagBatch
    ) -> tuple[Tensor, Tensor]:
        """:meth:`log_likelihood` with only the recurrence in the vertex loop.

        The loop computes, for ``v = 1..n-1``, the final state ``h_v = GRU(x_v, sum of the
        true predecessors' messages)`` and its message (32-row products, with
        :class:`~attnas.graphvae.shared_linear.SharedLinear` for the recurrent weights).
        Everything else depends on those states but feeds nothing back, so it runs after
        the loop, for all vertices at once: the vertex-type MLP on every ``h_{v-1}``, the
        teacher-forced intermediate states (one GRU call for every (graph, vertex, true
        predecessor ``j >= 1``)), the edge MLP on every candidate edge ``k -> v``, and the
        losses. Same values as :meth:`_log_likelihood_stepwise` (rounding aside).
        """
        types, n_nodes = batch.types, batch.n_nodes
        b, n = types.shape
        dev = z.device
        x = encode_ops(types)
        feats = descriptor_features(self.message_input, x, self.max_nodes)
        adj = batch.adj.to(x.dtype)
        tuned = self.layout_tuned
        if tuned:
            gi = input_products(x, self.gru.weight_ih, self.gru.bias_ih)  # (B, n, 3H): every vertex's input product
        else:
            gi = F.linear(x, self.gru.weight_ih, self.gru.bias_ih)
        hh = SharedLinear(self.gru.weight_hh, self.gru.bias_hh, per_map_weight_grad=tuned)
        gated = SharedLinear(*self.gated.fused(), per_map_weight_grad=tuned)
        if tuned:  # one UnbindBackward (a stack) instead of a zero-filled (B, n, *) per slice
            gi_at, feats_at = gi.unbind(1), feats.unbind(1)
        else:
            gi_at, feats_at = [gi[:, v] for v in range(n)], [feats[:, v] for v in range(n)]
        cell = fused_gru_cell if tuned else gru_cell
        h = torch.tanh(self.fc_h0(z))
        h = cell(gi_at[0], hh(h), h)
        states = [h]
        messages = [GatedSum.from_fused(gated(torch.cat([h, feats_at[0]], -1)))]
        for v in range(1, n):
            s = aggregate(adj[:, :v, v], torch.stack(messages, 1))
            h = cell(gi_at[v], hh(s), s)
            states.append(h)
            if v < n - 1:  # the last vertex sends no message
                messages.append(GatedSum.from_fused(gated(torch.cat([h, feats_at[v]], -1))))
        hs = torch.stack(states, 1)  # (B, n, H)
        ms = torch.stack(messages, 1)  # (B, n-1, H)
        active = torch.arange(1, n, device=dev).unsqueeze(0) < n_nodes.unsqueeze(1)  # (B, n-1): vertex v real
        logp = torch.log_softmax(self.add_vertex(hs[:, :-1]).to(z.dtype), -1)  # type of v from h_{v-1}
        type_ll = (logp.gather(-1, types[:, 1:].unsqueeze(-1)).squeeze(-1) * active.to(z.dtype)).sum(1)

        # Teacher-forced states: position j (1 <= j <= v) of vertex v has aggregated the true
        # predecessors u >= j of v. It differs from position j + 1 only when j is one. When
        # vertex 0 is not a predecessor, the state at the first predecessor is the final
        # state h_v of the loop; the other predecessors j >= 1 need one GRU row each.
        pred = batch.adj.transpose(1, 2).clone()  # pred[b, v, j]: j -> v
        pred[:, :, 0] = False
        pos = torch.arange(n, device=dev).expand(b, n, n)
        nearest = torch.where(pred, pos, torch.full_like(pos, n)).flip(2).cummin(2).values.flip(2)  # [b, v, p]
        is_final = pred & (pos == nearest[:, :, 1:2]) & ~batch.adj[:, 0, :].unsqueeze(2)  # state = h_v
        fresh = pred & ~is_final
        cut = (torch.arange(n - 1, device=dev).unsqueeze(0) >= torch.arange(n, device=dev).unsqueeze(1))  # [j, u]: u >= j
        weights = adj.transpose(1, 2)[:, :, :-1].unsqueeze(2) * cut.to(x.dtype)  # [b, v, j, u]
        gb, gv, gj = fresh.nonzero(as_tuple=True)  # one row per (graph, vertex, fresh predecessor), in order
        s_rows = torch.bmm(weights[gb, gv, gj].unsqueeze(1), ms[gb]).squeeze(1)
        gh_rows = hh(s_rows) if tuned else F.linear(s_rows, self.gru.weight_hh, self.gru.bias_hh)  # tuned: same bank
        st = cell(gi[gb, gv], gh_rows, s_rows)
        fb, fv = is_final.any(2).nonzero(as_tuple=True)
        zero_state = gru_from_zero(self.gru, encode_ops(torch.arange(self.num_types, device=dev)))
        nt, nf = zero_state.shape[0], fb.shape[0]
        dst_bank = self.add_edge.dst_part(torch.cat([zero_state, hs[fb, fv], st]))  # (T + F + R, 4H)
        # Bank row of the state at each true predecessor j >= 1, then at each position p: the
        # nearest true predecessor j >= p, else GRU(x_v, 0) (the per-type row).
        final_rank = is_final.any(2).reshape(-1).long().cumsum(0).view(b, n, 1) - 1
        fresh_rank = fresh.reshape(-1).long().cumsum(0).view(b, n, n) - 1
        row_of = torch.where(is_final, nt + final_rank, nt + nf + fresh_rank)
        bank_row = torch.where(
            nearest < n,
            row_of.gather(2, nearest.clamp(max=n - 1)),
            types.unsqueeze(2).expand(b, n, n),
        )
        # Candidate edges k -> v (k < v), scored with the state at position k + 1.
        kk, vv = torch.tril_indices(n, n, -1, device=dev).flip(0)  # rows: k < v, ordered by v
        src = self.add_edge.src_part(hs[:, :-1])  # (B, n-1, 4H): once per source vertex
        if self.fused_edges:  # no (B, E, 4H) tensor kept for the backward
            src_idx = (torch.arange(b, device=dev).unsqueeze(1) * (n - 1) + kk).reshape(-1)
            logits = edge_logits(src.reshape(b * (n - 1), -1), dst_bank, src_idx, bank_row[:, vv, kk + 1].reshape(-1),
                                 self.add_edge.fc2.weight, self.add_edge.fc2.bias).view(b, -1).to(z.dtype)
        else:
            logits = self.add_edge.combine(src[:, kk], dst_bank[bank_row[:, vv, kk + 1]]).to(z.dtype)
        target = adj[:, kk, vv]
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        edge_ll = -(bce * active[:, vv - 1].to(z.dtype)).sum(1)
        return type_ll, edge_ll

    def _log_likelihood_stepwise(
        self, z: Tensor, encode_ops: Callable[[Tensor], Tensor], batch: DagBatch
    ) -> tuple[Tensor, Tensor]:
        """:meth:`log_likelihood` vertex by vertex (the round-3 implementation, kept as a
        second implementation for the tests and the benchmark)."""
        types, n_nodes = batch.types, batch.n_nodes
        b, n = types.shape
        x = encode_ops(types)
        feats = descriptor_features(self.message_input, x, self.max_nodes)
        adj = batch.adj.to(x.dtype)
        rows = torch.arange(b, device=z.device)
        # A vertex before any predecessor has h = GRU(x, 0), a function of its type only.
        zero_state = gru_from_zero(self.gru, encode_ops(torch.arange(self.num_types, device=z.device)))
        zero_dst = self.add_edge.dst_part(zero_state)
        h = self.gru(x[:, 0], torch.tanh(self.fc_h0(z)))
        messages = [self.gated(torch.cat([h, feats[:, 0]], -1))]
        sources = [self.add_edge.src_part(h)]
        type_ll = z.new_zeros(b)
        edge_ll = z.new_zeros(b)
        for v in range(1, n):
            active = (v < n_nodes).to(z.dtype)
            logp = torch.log_softmax(self.add_vertex(h), -1)
            type_ll = type_ll + logp[rows, types[:, v]] * active
            w = adj[:, :v, v]  # true predecessors of v among 0..v-1
            # s_sum[:, j] = sum of the messages of the true predecessors u >= j of v
            masked = w.unsqueeze(-1) * torch.stack(messages, 1)
            s_sum = masked.flip(1).cumsum(1).flip(1)
            if self.dedup:
                h, dst = self._forced_states(x[:, v], types[:, v], s_sum, w, zero_state, zero_dst)
            else:
                h, dst = self._forced_states_dense(x[:, v], s_sum)
            logits = self.add_edge.combine(torch.stack(sources, 1), dst)  # edge k -> v, state after k+1..v-1
            bce = F.binary_cross_entropy_with_logits(logits, w, reduction="none").sum(1)
            edge_ll = edge_ll - bce * active
            if v < n - 1:  # the last vertex sends no message
                messages.append(self.gated(torch.cat([h, feats[:, v]], -1)))
                sources.append(self.add_edge.src_part(h))
        return type_ll, edge_ll

    def _forced_states_dense(self, x_v: Tensor, s_sum: Tensor) -> tuple[Tensor, Tensor]:
        """Every teacher-forced state of vertex ``v``, one GRU row per candidate edge.

        Args:
            x_v: Operation features of vertex ``v``.
            s_sum: Aggregated messages for positions ``j = 0..v-1``; position ``v`` is the
                empty sum.

        Returns:
            ``(final, dst)``: the final state of ``v`` and the edge-MLP target part of the
            state that scores each edge ``k -> v`` (position ``k + 1``).

        Shapes:
            - **x_v**: ``(B, x_dim)``
            - **s_sum**: ``(B, v, H)``
            - **output**: ``(B, H)`` and ``(B, v, 4H)``
        """
        b, v, hdim = s_sum.shape
        s_all = torch.cat([s_sum, s_sum.new_zeros(b, 1, hdim)], 1)
        x_all = x_v.unsqueeze(1).expand(b, v + 1, x_v.shape[-1])
        st = self.gru(x_all.reshape(b * (v + 1), -1), s_all.reshape(b * (v + 1), hdim)).view(b, v + 1, hdim)
        return st[:, 0], self.add_edge.dst_part(st[:, 1:])

    def _forced_states(
        self, x_v: Tensor, t_v: Tensor, s_sum: Tensor, w: Tensor, zero_state: Tensor, zero_dst: Tensor
    ) -> tuple[Tensor, Tensor]:
        """The same as :meth:`_forced_states_dense`, computing each distinct state once.

        Position ``j`` (the state after the candidates ``j..v-1``) differs from position
        ``j + 1`` only when ``j`` is a true predecessor; position ``v`` is ``GRU(x_v, 0)``,
        taken from the per-type table ``zero_state``. The GRU runs on the positions ``j``
        that are true predecessors; the edge-MLP target part is needed for ``j >= 1`` only.

        Args:
            x_v: Operation features of vertex ``v`` (``(B, x_dim)``).
            t_v: Its type (``(B,)``).
            s_sum: Aggregated messages for positions ``0..v-1`` (``(B, v, H)``).
            w: True predecessor indicators (``(B, v)``).
            zero_state: ``GRU(x_t, 0)`` of every type ``t`` (``(T, H)``).
            zero_dst: Edge-MLP target part of ``zero_state`` (``(T, 4H)``).
        """
        b, v, _ = s_sum.shape
        nt = zero_state.shape[0]
        pred = w > 0
        upper = pred[:, 1:].nonzero()  # (graph, j - 1) for true predecessors j >= 1
        first = pred[:, 0].nonzero().squeeze(1)  # graphs whose vertex 0 is a predecessor
        g_rows = torch.cat([upper[:, 0], first])
        s_rows = torch.cat([s_sum[upper[:, 0], upper[:, 1] + 1], s_sum[first, 0]])
        st = self.gru(x_v[g_rows], s_rows)
        n_upper = upper.shape[0]
        dst_bank = torch.cat([zero_dst, self.add_edge.dst_part(st[:n_upper])])
        state_bank = torch.cat([zero_state, st])
        # Positions 1..v: nearest true predecessor at or above j, or v (the empty sum).
        pos = torch.arange(1, v + 1, device=w.device).expand(b, v)
        cand = torch.where(torch.cat([pred[:, 1:], pred.new_ones(b, 1)], 1), pos, torch.full_like(pos, v))
        src = cand.flip(1).cummin(1).values.flip(1)  # (B, v) for j = 1..v
        rank = (pred[:, 1:].reshape(-1).long().cumsum(0) - 1).view(b, v - 1)
        rank = torch.cat([rank, rank.new_zeros(b, 1)], 1)
        upper_row = nt + rank.gather(1, (src - 1).clamp(max=v - 1))
        row = torch.where(src < v, upper_row, t_v.unsqueeze(1).expand(b, v))
        first_rank = pred[:, 0].long().cumsum(0) - 1
        final_row = torch.where(pred[:, 0], nt + n_upper + first_rank, row[:, 0])
        return state_bank[final_row], dst_bank[row]

    # ------------------------------------------------------------------ generation

    @torch.no_grad()
    def sample(
        self,
        z: Tensor,
        encode_ops: Callable[[Tensor], Tensor],
        stochastic: bool = True,
        generator: torch.Generator | None = None,
    ) -> DagBatch:
        """Decode latent codes into DAGs (D-VAE's ``decode``).

        Args:
            z: Latent codes.
            encode_ops: Maps vertex types ``(B,)`` to operation features ``(B, x_dim)``.
            stochastic: Sample types and edges (D-VAE's default) instead of taking the
                most likely choice.
            generator: Random generator for the samples.

        Returns:
            The decoded graphs; a graph that ends early is padded.

        Shapes:
            - **z**: ``(B, latent)``
        """
        b, n, dev = z.shape[0], self.max_nodes, z.device
        types = torch.full((b, n), START_TYPE, dtype=torch.long, device=dev)
        adj = torch.zeros((b, n, n), dtype=torch.bool, device=dev)
        n_nodes = torch.full((b,), n, dtype=torch.long, device=dev)
        finished = torch.zeros(b, dtype=torch.bool, device=dev)
        eye = torch.eye(n, device=dev, dtype=z.dtype)
        h = self.gru(encode_ops(types[:, 0]), torch.tanh(self.fc_h0(z)))
        messages = [self.gated(torch.cat([h, self._feat(eye, 0, encode_ops(types[:, 0]))], -1))]
        sources = [self.add_edge.src_part(h)]
        for v in range(1, n):
            if v == n - 1:
                new = torch.full((b,), END_TYPE, dtype=torch.long, device=dev)
            else:
                logits = self.add_vertex(h)
                if stochastic:
                    new = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)
                else:
                    new = logits.argmax(-1)
            new = torch.where(finished, torch.full_like(new, START_TYPE), new)
            types[:, v] = new
            x_v = encode_ops(new)
            ends = (new == END_TYPE) & ~finished
            grow = ~finished & ~ends
            s_in = z.new_zeros(b, self.hidden)
            state = gru_from_zero(self.gru, x_v)
            for k in range(v - 1, -1, -1):
                p = torch.sigmoid(self.add_edge.combine(sources[k], self.add_edge.dst_part(state)))
                if stochastic:
                    add = torch.rand(b, generator=generator, device=dev) < p
                else:
                    add = p > 0.5
                add = add & grow
                if add.any():
                    adj[:, k, v] = add
                    rows = add.nonzero().squeeze(1)
                    s_in = s_in.index_add(0, rows, messages[k][rows])
                    state = state.index_copy(0, rows, self.gru(x_v[rows], s_in[rows]))
            if ends.any():
                # the output vertex takes an edge from every vertex still without a successor
                loose = ~adj[:, :v, :].any(-1) & ends.unsqueeze(1)
                adj[:, :v, v] |= loose
                weights = adj[:, :v, v].to(z.dtype)
                s_end = aggregate(weights, torch.stack(messages, 1))
                state = torch.where(ends.unsqueeze(1), self.gru(x_v, s_end), state)
                n_nodes[ends] = v + 1
                finished |= ends
            h = state
            if v < n - 1:
                messages.append(self.gated(torch.cat([h, self._feat(eye, v, x_v)], -1)))
                sources.append(self.add_edge.src_part(h))
        return DagBatch(types, adj, n_nodes)

    def _feat(self, eye: Tensor, v: int, x_v: Tensor) -> Tensor:
        if self.message_input == "operation":
            return x_v
        return eye[v].unsqueeze(0).expand(x_v.shape[0], -1)
