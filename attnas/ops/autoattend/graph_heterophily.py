"""The operation pool for heterophilous graphs (``space.pool: hetero``).

On graphs where linked nodes tend to differ (web pages, co-purchase and fraud graphs),
operations that can only average neighbours (GCN, GAT) blur a node into dissimilar
neighbours. Besides the AutoAttend Cora pool's ``zero``, ``identity``, ``linear``, ``gcn``,
``sage``, ``cheb`` and GAT with 1 or 8 heads (:mod:`attnas.ops.autoattend.graph_pyg`), this pool holds
the operations that work under heterophily:

- ``gat_sep_1`` / ``gat_sep_8``: GAT with the ego node kept apart from its neighbours
  (Platonov et al., ICLR 2023), :class:`~attnas.ops.autoattend.graph_pyg.GATOp` with ``separate=True``;
- ``fagcn``: signed attention (FAGCN; Bo, Wang, Shi & Shen, AAAI 2021), a neighbour's
  message can be added or subtracted;
- ``gpr``: learned multi-hop propagation with signed hop weights (GPR-GNN; Chien, Peng, Li
  & Milenkovic, ICLR 2021), which can learn low-pass and high-pass filters.

Factories take ``(in_dim, out_dim=in_dim, *, act, attn_dropout, **_)`` as the other pools.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric import nn as gnn
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from attnas.registry import register_op
from attnas.ops.autoattend import graph_pyg
from attnas.ops.autoattend.common import activation, register_common_ops
from attnas.ops.shared.dropout import fast_dropout
from attnas.ops.autoattend.graph_context import GraphContext, project

POOL = "hetero"


class FAGCNOp(nn.Module):
    """Signed attention, FAGCN's layer (Bo et al., AAAI 2021, Eq. 7-8) on a linear map of the input:

    ``z = W x + b``, ``alpha_uv = tanh(a_l . z_u + a_r . z_v)`` in (-1, 1),
    ``h'_v = act(eps z_v + sum_{u in N(v) + v} alpha_uv / sqrt(d_u d_v) z_u)``

    with d the degrees counting self-loops (torch_geometric's ``FAConv`` with
    ``x_0 = z``, the operation's own input as the ego term). A negative coefficient
    subtracts the neighbour's message: a high-pass filter where neighbours differ.

    Shapes:
        - x: [N, in_dim]
        - output: [N, out_dim]
    """

    def __init__(self, in_dim: int, out_dim: int, act: str, attn_dropout: float, eps: float = 0.3):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)
        self.conv = gnn.FAConv(out_dim, eps=eps, dropout=attn_dropout)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        z = project(x, self.lin.weight, self.lin.bias)
        (src, dst), w = ctx.memo("gcn_edges", lambda: gcn_norm(ctx.edge_index, None, ctx.num_nodes,
                                                                  add_self_loops=True))
        c = self.conv
        alpha = torch.tanh(c.att_l(z)[src] + c.att_r(z)[dst]).squeeze(-1)
        alpha = fast_dropout(alpha, c.dropout, self.training)
        out = torch.zeros_like(z).index_add_(0, dst, z.index_select(0, src) * (alpha * w).unsqueeze(-1))
        return self.act(out + c.eps * z)


class GPRPropagation(nn.Module):
    """GPR-GNN's generalized PageRank propagation (Chien et al., ICLR 2021, Eq. 2):

    ``Z = sum_{k=0}^{K} gamma_k A~^k H``, ``A~ = D^-1/2 (A + I) D^-1/2``

    with learned hop weights gamma, initialised as personalized PageRank
    (``gamma_k = alpha (1 - alpha)^k``, ``gamma_K = (1 - alpha)^K``). The weights may turn
    negative in training, which gives high-pass filters (GPR-GNN's Fig. 1 and Thm. 4.2).

    Shapes:
        - h: [N, C]
        - output: [N, C]
    """

    def __init__(self, K: int = 10, alpha: float = 0.1):
        super().__init__()
        gamma = alpha * (1 - alpha) ** torch.arange(K + 1, dtype=torch.float)
        gamma[-1] = (1 - alpha) ** K
        self.K = K
        self.gamma = nn.Parameter(gamma)

    def forward(self, h: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        out = self.gamma[0] * h
        for k in range(1, self.K + 1):
            h = ctx.propagate("gcn_adj", h)
            out = out + self.gamma[k] * h
        return out


class GPROp(nn.Module):
    """GPR-GNN's propagation on a linear map of the input: ``act(sum_k gamma_k A~^k (W x + b))``.

    Shapes:
        - x: [N, in_dim]
        - output: [N, out_dim]
    """

    def __init__(self, in_dim: int, out_dim: int, act: str, K: int = 10, alpha: float = 0.1):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)
        self.prop = GPRPropagation(K, alpha)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        return self.act(self.prop(project(x, self.lin.weight, self.lin.bias), ctx))


register_common_ops(POOL)
for _name in ("linear", "gcn", "sage", "cheb"):
    register_op(POOL, _name)(graph_pyg.FACTORIES[_name])
for _h in (1, 8):
    register_op(POOL, f"gat_{_h}")(graph_pyg._gat(_h))


def _gat_sep(heads: int):
    def factory(in_dim: int, out_dim: int | None = None, *, act: str = "elu", attn_dropout: float = 0.0,
                **_: object) -> nn.Module:
        return graph_pyg.GATOp(in_dim, out_dim or in_dim, heads, act, attn_dropout, separate=True)

    factory.__doc__ = (f"GAT-sep (Platonov et al., ICLR 2023): GATConv with {heads} head(s) over the "
                       "neighbours, plus the node's own features through a separate weight.")
    return factory


for _h in (1, 8):
    register_op(POOL, f"gat_sep_{_h}")(_gat_sep(_h))


@register_op(POOL, "fagcn")
def fagcn(in_dim: int, out_dim: int | None = None, *, act: str = "elu", attn_dropout: float = 0.0,
          **_: object) -> nn.Module:
    """FAGCN (Bo et al., AAAI 2021): signed tanh attention plus 0.3 x the ego features."""
    return FAGCNOp(in_dim, out_dim or in_dim, act, attn_dropout)


@register_op(POOL, "gpr")
def gpr(in_dim: int, out_dim: int | None = None, *, act: str = "elu", **_: object) -> nn.Module:
    """GPR-GNN (Chien et al., ICLR 2021): K = 10 hops with learned signed weights."""
    return GPROp(in_dim, out_dim or in_dim, act)
