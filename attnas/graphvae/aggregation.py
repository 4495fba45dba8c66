"""D-VAE's gated-sum aggregation of predecessor messages.

Chatzianastasis et al., 2021, Appendix A, Eqs. 6 and 10 (D-VAE, Zhang et al. 2019, Sec. 3.2)::

    h_u^in = sum_{v -> u} g(Cat(h_v, x_v)) * m(Cat(h_v, x_v))

with ``g`` a gating network (linear + sigmoid) and ``m`` a mapping network (linear,
without bias, so an absent predecessor contributes exactly zero). The message of a
vertex depends on that vertex alone, so it is computed once per vertex and the sum over
predecessors is a product with the adjacency matrix.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class GatedSum(nn.Module):
    """Gated messages ``g(s) * m(s)`` of D-VAE (Chatzianastasis et al., 2021, Eq. 6/10).

    Args:
        in_dim: Size of the vertex descriptor ``s = Cat(h_v, x_v)``.
        out_dim: Size of the message (the hidden state size).

    Shapes:
        - **input**: ``(*, in_dim)``
        - **output**: ``(*, out_dim)``
    """

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.gate = nn.Linear(in_dim, out_dim)
        self.mapper = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, s: Tensor) -> Tensor:
        """The message of each descriptor."""
        return torch.sigmoid(self.gate(s)) * self.mapper(s)

    def fused(self) -> tuple[Tensor, Tensor]:
        """Both networks' first products as one: weight ``[W_g; W_m]`` and bias ``[b_g; 0]``.

        ``F.linear(s, *fused())`` gives ``Cat(W_g s + b_g, W_m s)``; :meth:`from_fused`
        turns it into the message. One product with twice the columns instead of two.

        Shapes:
            - **output**: ``(2 * out_dim, in_dim)`` and ``(2 * out_dim,)``
        """
        bias = torch.cat([self.gate.bias, torch.zeros_like(self.gate.bias)])
        return torch.cat([self.gate.weight, self.mapper.weight]), bias

    @staticmethod
    def from_fused(out: Tensor) -> Tensor:
        """The message ``sigma(g) * m`` from ``Cat(g, m)`` (``(*, 2 * out_dim) -> (*, out_dim)``)."""
        g, m = out.chunk(2, -1)
        return torch.sigmoid(g) * m


def aggregate(weights: Tensor, messages: Tensor) -> Tensor:
    """Sum messages over predecessors: ``out[b] = sum_u weights[b, u] * messages[b, u]``.

    Args:
        weights: 0/1 (or real) predecessor weights.
        messages: One message per candidate predecessor.

    Shapes:
        - **weights**: ``(B, U)``
        - **messages**: ``(B, U, H)``
        - **output**: ``(B, H)``
    """
    return torch.bmm(weights.unsqueeze(1), messages).squeeze(1)


def descriptor_features(mode: str, x: Tensor, num_ids: int) -> Tensor:
    """The vertex features concatenated to a hidden state to form a message descriptor.

    D-VAE's Eq. 4 and Chatzianastasis et al.'s (2021) Eqs. 6/10 write the descriptor as ``Cat(h_v, x_v)`` with
    ``x_v`` the vertex's operation (one-hot or embedding): mode ``"operation"``. The public
    D-VAE code and Chatzianastasis et al.'s code concatenate the one-hot *index* of the
    vertex instead (their ``vid=True`` default): mode ``"vertex_id"``.

    Args:
        mode: ``"vertex_id"`` or ``"operation"``.
        x: The operation features of every vertex.
        num_ids: Size of the vertex-index one-hot (the model's largest node count ``N_max``).

    Shapes:
        - **x**: ``(B, N, D)`` with ``N <= num_ids``
        - **output**: ``(B, N, num_ids)`` for ``vertex_id``, ``(B, N, D)`` for ``operation``
    """
    if mode == "operation":
        return x
    b, n, _ = x.shape
    eye = torch.eye(num_ids, dtype=x.dtype, device=x.device)[:n]
    return eye.unsqueeze(0).expand(b, n, num_ids)
