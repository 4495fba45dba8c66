"""Pre-norm residual blocks around the layers of an AutoAttend network (``space.block: residual``).

Platonov, Kuznedelev, Diskin, Babenko & Prokhorenkova, *A critical look at the evaluation of
GNNs under heterophily: are we really making progress?*, ICLR 2023, Sec. 4 ("we augment all
models with skip connections and layer normalization"; their ``ResidualModuleWrapper``):
a GNN layer becomes

    ``h_t = h_{t-1} + Dropout(W_2 GELU(W_1 GNN(LayerNorm(h_{t-1}))))``

and the classifier reads ``LayerNorm(h_n)``. In an AutoAttend network (Guan et al., ICML
2021) layer ``t`` aggregates several connections, each an operation on an earlier layer
``s``; with these blocks

- every operation reading layer ``s`` sees ``LayerNorm_s(h_s)`` (one normalisation per
  layer, shared by all its readers), and the head reads ``LayerNorm_n(h_n)``;
- layer ``t``'s aggregation ``a_t`` (the addition layer's sum, the attention layer's Eq. 8)
  is added to the previous layer: ``h_t = h_{t-1} + Dropout(W_t a_t + b_t)``.

An operation is a linear map followed by the space's activation (``act: gelu`` gives
Platonov et al.'s ``GELU(W_1 .)``), so ``W_t`` is their ``W_2``: a chain of
``add(t-1:sage, 0:zero)`` layers is their GraphSAGE block by block (the concatenation
``W_1 [x || mean_u x_u]`` is SAGEConv's ``W_r x + W_l mean_u x_u``).
"""

from __future__ import annotations

import torch
from torch import nn

from attnas.ops.shared.dropout import fast_dropout


class PreNormResidual(nn.Module):
    """The normalisations and residual projections of an ``n``-layer network, one per layer position.

    Args:
        widths: Every layer's width, layer 0 (the stem's output) to ``n``; all equal (the
            residual stream keeps one width).
        dropout: ``p`` of the dropout on each layer's update.

    Shapes:
        - h, a: [..., width]
        - output: [..., width]
    """

    def __init__(self, widths: list[int], dropout: float):
        super().__init__()
        if len(set(widths)) != 1:
            raise ValueError(f"residual blocks need one width for every layer, got {widths}")
        self.norms = nn.ModuleList(nn.LayerNorm(w) for w in widths)
        self.updates = nn.ModuleList(nn.Linear(w, w) for w in widths[1:])
        self.p = dropout

    def norm(self, s: int, h: torch.Tensor) -> torch.Tensor:
        """``LayerNorm_s(h_s)``: what the operations reading layer ``s`` (or the head, ``s = n``) see."""
        return self.norms[s](h)

    def update(self, t: int, h_prev: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``h_t = h_{t-1} + Dropout(W_t a_t + b_t)`` for layer ``t`` (1-based)."""
        return h_prev + fast_dropout(self.updates[t - 1](a), self.p, self.training)
