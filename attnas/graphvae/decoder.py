"""The autoregressive DAG decoder of D-VAE, shared by the D-VAE and GCN encoders.

D-VAE (Zhang et al., NeurIPS 2019, Sec. 3.3), used unchanged by the operation-embeddings
paper (Chatzianastasis et al., 2021, Sec. 3.2.2). From ``z`` the initial state
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
score the edge ``k -> v`` aggregates the true predecessors ``u`` of ``v`` with ``u > k``.
A state only changes when ``k + 1`` is a true predecessor, so each distinct state is
computed once and gathered into place.

Only the final state of each vertex and its message feed later vertices, so
:meth:`DagDecoder.log_likelihood` runs just that recurrence vertex by vertex (its
recurrent products through :func:`~attnas.graphvae.step_products.step_linear`) and
computes everything else for all vertices at once after the loop.
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
from attnas.graphvae.gru import gru_cell, gru_from_zero
from attnas.graphvae.step_products import edge_logits, step_linear


class EdgeScorer(nn.Module):
    """D-VAE's edge MLP ``f_add_edge(Cat(h_k, h_t))`` (Linear 2H -> 4H, ReLU, Linear 4H -> 1).

    Step 3 of D-VAE's decoder (Zhang et al. 2019, Sec. 3.3; Chatzianastasis et al., 2021, Sec. 3.2.2): the
    edge ``u_k -> u_t`` is added with probability ``sigmoid(f_add_edge(Cat(h_{u_k}, h_{u_t})))``.

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
    """D-VAE's autoregressive DAG decoder (Zhang et al. 2019; Chatzianastasis et al., 2021, Sec. 3.2.2).

    Args:
        num_types: Number of vertex types (input and output included).
        max_nodes: Largest number of vertices to generate (the last is forced to be the output).
        hidden: Hidden state size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        x_dim: Size of the operation features fed to the GRU.
        message_input: Vertex descriptor in messages, ``"vertex_id"`` or ``"operation"``.
    """

    def __init__(
        self,
        num_types: int,
        max_nodes: int,
        hidden: int,
        latent: int,
        x_dim: int,
        message_input: Literal["vertex_id", "operation"] = "vertex_id",
    ):
        super().__init__()
        self.num_types = num_types
        self.max_nodes = max_nodes
        self.hidden = hidden
        self.message_input = message_input
        feat = max_nodes if message_input == "vertex_id" else x_dim
        self.fc_h0 = nn.Linear(latent, hidden)
        self.gru = nn.GRUCell(x_dim, hidden)
        self.gated = GatedSum(hidden + feat, hidden)
        self.add_vertex = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.ReLU(), nn.Linear(2 * hidden, num_types))
        self.add_edge = EdgeScorer(hidden)

    # ------------------------------------------------------------------ teacher forcing

    def log_likelihood(self, z: Tensor, encode_ops: Callable[[Tensor], Tensor], batch: DagBatch) -> tuple[Tensor, Tensor]:
        """Teacher-forced log-likelihood of ``batch`` given ``z`` (D-VAE's ``loss``).

        The reconstruction term ``log p(G | z)`` of the ELBO (Chatzianastasis et al., 2021, Eq. 1): the
        log-probability of every vertex type and of every edge decision ``k -> v``
        (``k < v``) of D-VAE's generation procedure (module doc), with the true types and
        edges fed in.

        The vertex loop computes, for ``v = 1..n-1``, only the final state ``h_v =
        GRU(x_v, sum of the true predecessors' messages)`` and its message, with the GRU's
        input products of all vertices computed before the loop and the recurrent and
        gated-sum products through :func:`~attnas.graphvae.step_products.step_linear`.
        Everything else depends on those states but feeds nothing back, so it runs after
        the loop for all vertices at once: the vertex-type MLP on every ``h_{v-1}``, the
        teacher-forced intermediate states (one GRU row for every (graph, vertex, true
        predecessor ``j >= 1``) whose state is not already a final state), the edge MLP on
        every candidate edge ``k -> v`` (:func:`~attnas.graphvae.step_products.edge_logits`),
        and the losses.

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
        types, n_nodes = batch.types, batch.n_nodes
        b, n = types.shape
        dev = z.device
        x = encode_ops(types)
        feats = descriptor_features(self.message_input, x, self.max_nodes)
        adj = batch.adj.to(x.dtype)
        gi = F.linear(x, self.gru.weight_ih, self.gru.bias_ih)  # (B, n, 3H): every vertex's input product
        hh = step_linear(self.gru.weight_hh, self.gru.bias_hh)
        gated = step_linear(*self.gated.fused())
        gi_at, feats_at = gi.unbind(1), feats.unbind(1)
        h = torch.tanh(self.fc_h0(z))
        h = gru_cell(gi_at[0], hh(h), h)
        states = [h]
        messages = [GatedSum.from_fused(gated(torch.cat([h, feats_at[0]], -1)))]
        for v in range(1, n):
            s = aggregate(adj[:, :v, v], torch.stack(messages, 1))
            h = gru_cell(gi_at[v], hh(s), s)
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
        st = gru_cell(gi[gb, gv], hh(s_rows), s_rows)
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
        src_idx = (torch.arange(b, device=dev).unsqueeze(1) * (n - 1) + kk).reshape(-1)
        logits = edge_logits(src.reshape(b * (n - 1), -1), dst_bank, src_idx, bank_row[:, vv, kk + 1].reshape(-1),
                             self.add_edge.fc2.weight, self.add_edge.fc2.bias).view(b, -1).to(z.dtype)
        target = adj[:, kk, vv]
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        edge_ll = -(bce * active[:, vv - 1].to(z.dtype)).sum(1)
        return type_ll, edge_ll

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

        D-VAE's generation procedure (Zhang et al. 2019, Sec. 3.3; Chatzianastasis et al., 2021, Sec. 3.2.2;
        steps 1-3 of the module doc), one vertex at a time for the whole batch.

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
        """The descriptor features of vertex ``v`` in a message (see
        :func:`~attnas.graphvae.aggregation.descriptor_features`), ``(B, F)``."""
        if self.message_input == "operation":
            return x_v
        return eye[v].unsqueeze(0).expand(x_v.shape[0], -1)
