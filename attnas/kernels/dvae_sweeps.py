"""Kernel ``dvae_sweeps``: both sweeps of D-VAE's bidirectional encoder at once, with the two
directions' weights stacked. Pure PyTorch.

Overrides :meth:`attnas.graphvae.dvae_encoder.DVAEEncoder.sweeps` (hook ``dvae_sweeps``) when
every graph of the batch is a chain in index order in both directions (ENAS's DAGs); elsewhere
the encoder's two :meth:`~attnas.graphvae.dvae_encoder.DVAEEncoder.propagate` calls run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnas.graphvae.aggregation import GatedSum, aggregate
from attnas.graphvae.dvae_encoder import DVAEEncoder
from attnas.graphvae.gru import gru_cell, gru_from_zero
from attnas.graphvae.step_products import step_linear
from attnas.ops import overrides


def both_sweeps(enc: DVAEEncoder, x: Tensor, feats: Tensor, adj: Tensor) -> tuple[Tensor, Tensor]:
    """Both sweeps of the bidirectional encoder at once, on graphs in index order.

    Eqs. 6-7 / 10-11 of Chatzianastasis et al. (2021; D-VAE, Zhang et al. 2019, Sec. 3.1) in both
    directions of D-VAE's bidirectional encoder: step ``t`` updates vertex ``t`` in the forward sweep and
    vertex ``N - 1 - t`` in the reverse one. The two directions' products run as one
    product of the stacked weights (:func:`~attnas.graphvae.step_products.step_linear`
    with ``D = 2``); the GRU's input products of every vertex are computed before the
    loop (``F.linear``) and each step is
    :func:`~attnas.graphvae.gru.gru_cell`. Same states as two
    :meth:`~attnas.graphvae.dvae_encoder.DVAEEncoder.propagate` calls.

    Args:
        x: Operation features, ``(B, N, x_dim)``.
        feats: Message descriptor features, ``(B, N, F)``.
        adj: Float adjacency, ``(B, N, N)``.

    Returns:
        The forward and the backward state of every vertex, ``(B, N, hidden)`` each.
    """
    n = x.shape[1]
    grus = (enc.gru_forward, enc.gru_backward)
    gi = torch.stack([F.linear(x, g.weight_ih, g.bias_ih) for g in grus])  # (2, B, N, 3H)
    hh = step_linear(torch.stack([g.weight_hh for g in grus]), torch.stack([g.bias_hh for g in grus]))
    fused = [g.fused() for g in (enc.gated_forward, enc.gated_backward)]
    msg = step_linear(torch.stack([w for w, _ in fused]), torch.stack([bias for _, bias in fused]))
    # step t: (forward vertex t, reverse vertex N - 1 - t)
    gi_at = torch.stack([gi[0], gi[1].flip(1)]).unbind(2)  # (2, B, 3H) per step
    feats_at = torch.stack([feats, feats.flip(1)]).unbind(2)  # (2, B, F) per step
    fwd: list[Tensor] = []
    back: list[Tensor] = []  # back[t] is vertex N - 1 - t
    msg_f: list[Tensor] = []
    msg_b: list[Tensor] = []
    for t in range(n):
        vf, vb = t, n - 1 - t
        if t == 0:  # no vertex can send a message yet: GRU(x, 0)
            h = torch.stack([gru_from_zero(grus[0], x[:, vf]), gru_from_zero(grus[1], x[:, vb])])
        else:
            s = torch.stack([
                aggregate(adj[:, :vf, vf], torch.stack(msg_f, 1)),  # predecessors 0..t-1
                aggregate(adj[:, vb, vb + 1 :], torch.stack(msg_b[::-1], 1)),  # successors vb+1..N-1
            ])
            h = gru_cell(gi_at[t], hh(s), s)
        fwd.append(h[0])
        back.append(h[1])
        if t != n - 1:  # the last vertex of a sweep has no one to send to
            m = GatedSum.from_fused(msg(torch.cat([h, feats_at[t]], -1)))
            msg_f.append(m[0])
            msg_b.append(m[1])
    return torch.stack(fwd, 1), torch.stack(back[::-1], 1)


def sweeps(enc: DVAEEncoder, x: Tensor, feats: Tensor, adj: Tensor,
           n_nodes: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Override of :meth:`DVAEEncoder.sweeps` (graphs in index order in both directions)."""
    if not (enc.index_order(adj, n_nodes, False) and enc.index_order(adj, n_nodes, True)):
        return NotImplemented
    return both_sweeps(enc, x, feats, adj)


overrides.register("dvae_sweeps", "dvae_sweeps", sweeps)
