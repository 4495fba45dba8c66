"""The AutoAttend attention layer on graphs, computed edge-wise.

Guan et al., *AutoAttend: Automated Attention Representation Search*, ICML 2021,
Eq. 8 and Sec. 5.2.2: multi-head scaled dot-product attention whose energy
``Q_i K_i^T / sqrt(d/h)`` is masked by the adjacency matrix. Instead of an N x N
matrix with ``-inf`` outside the edges, the energies are computed only on edges and
normalised per target node with :func:`torch_geometric.utils.softmax`, which is the
same result in memory linear in the number of edges.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch_geometric.utils import softmax

from attnas.ops.shared.dropout import fast_dropout
from attnas.ops.autoattend.graph_context import GraphContext


class EdgeScaledDotProductAttention(nn.Module):
    r"""Multi-head scaled dot-product attention restricted to graph edges (Eq. 8).

    .. math::
        \mathbf{o}_{v,i} = \sum_{u \in \mathcal{N}(v) \cup \{v\}}
        \operatorname{softmax}_u\Big(\frac{\mathbf{q}_{v,i}^\top \mathbf{k}_{u,i}}{\sqrt{d/h}}\Big)
        \mathbf{v}_{u,i}, \qquad \mathbf{o}_v = \operatorname{Row\_Cat}(\mathbf{o}_{v,1}, \dots, \mathbf{o}_{v,h})

    Query, key and value come from the searched connections; the layer has no
    parameters of its own. Self-loops are added so an isolated node attends to itself.
    Where the width d is not divisible by h (an attention layer over class scores), the
    layer uses the largest number of heads below h that divides d.

    With ``qk_norm`` each head's query and key are first divided by their root mean square,
    :math:`\mathbf{q}_{v,i} \leftarrow \mathbf{q}_{v,i} / \sqrt{\operatorname{mean}(\mathbf{q}_{v,i}^2) + \epsilon}`
    (not in the paper): the energies then do not vanish when the query and key
    operations output small vectors.

    Args:
        heads: Number of heads h (the paper uses 4 for graphs).
        dropout: Dropout on the attention coefficients (as GAT does).
        qk_norm: Scale queries and keys to unit root-mean-square per head.

    Shapes:
        - q, k, v: [N, d]
        - output: [N, d]
    """

    def __init__(self, heads: int = 4, dropout: float = 0.0, qk_norm: bool = False):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qk_norm = qk_norm

    def heads_for(self, d: int) -> int:
        """The heads used at width ``d``: the largest number up to ``heads`` that divides it."""
        return max(i for i in range(1, min(self.heads, d) + 1) if d % i == 0)

    def energies(self, q: torch.Tensor, k: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        """The scaled dot products ``q_v . k_u / sqrt(d/h)`` of Eq. 8, one per edge ``u -> v``
        of ``ctx.edge_index_with_self_loops`` and head: ``[E, h]``."""
        n, d = q.shape
        h = self.heads_for(d)
        src, dst = ctx.edge_index_with_self_loops
        qh, kh = q.view(n, h, d // h), k.view(n, h, d // h)
        if self.qk_norm:
            qh, kh = _unit_rms(qh), _unit_rms(kh)
        return (qh.index_select(0, dst) * kh.index_select(0, src)).sum(-1) / math.sqrt(d / h)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        n, d = q.shape
        h = self.heads_for(d)
        src, dst = ctx.edge_index_with_self_loops
        vh = v.view(n, h, d // h)
        alpha = softmax(self.energies(q, k, ctx), dst, num_nodes=n)
        alpha = fast_dropout(alpha, self.dropout, self.training)
        msg = vh.index_select(0, src) * alpha.unsqueeze(-1)  # [E, h, d/h]
        out = torch.zeros_like(vh).index_add_(0, dst, msg)
        return out.view(n, d)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, dropout={self.dropout}" + (", qk_norm=True" if self.qk_norm else "")


def _unit_rms(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``x`` divided by the root mean square of its last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

