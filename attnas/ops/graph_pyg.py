"""The Cora / PPI operation pool of AutoAttend: stand-alone graph convolutions from torch_geometric.

Guan et al., ICML 2021, Sec. 5.2.1: "zero, identity, GCNConv (Kipf & Welling, 2017),
SageConv (Hamilton et al., 2017), GATConv (Velickovic et al., 2018) with head number in
{1, 2, 4, 8, 16}, Linear, ARMAConv (Bianchi et al., 2019), ChebConv (Defferrard et al.,
2016), SGConv (Wu et al., 2019)". Each parametric operation is the torch_geometric
layer followed by the space's activation.

Factories take ``(dim, *, act, attn_dropout, last, **_)`` and return a module with
``forward(x, ctx) -> [N, dim]``.

GCN, SG, Chebyshev and ARMA layers are the torch_geometric modules, but their
propagation uses the normalised adjacency the :class:`GraphContext` caches per graph
(one sparse product instead of re-normalising the edges on every call); tests check
each against the torch_geometric layer's own ``forward``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric import nn as gnn

from attnas._registry import register_op
from attnas.ops.common import activation, register_common_ops
from attnas.ops.graph_context import GraphContext

POOL = "pyg"
GAT_HEADS = (1, 2, 4, 8, 16)


class PyGOp(nn.Module):
    """A torch_geometric layer ``conv(x, edge_index)`` followed by an activation.

    Args:
        conv: The layer.
        act: Activation name (``relu``, ``elu``, ``tanh``, ...).
        uses_edges: False for layers that ignore the graph (Linear).
        self_loops: Pass the edges with self-loops already added (for layers built with
            ``add_self_loops=False``, so the loops are added once per graph).

    Shapes:
        - x: [N, d_in]
        - output: [N, d_out]
    """

    def __init__(self, conv: nn.Module, act: str, uses_edges: bool = True, self_loops: bool = False):
        super().__init__()
        self.conv = conv
        self.act = activation(act)
        self.uses_edges = uses_edges
        self.self_loops = self_loops

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        if not self.uses_edges:
            return self.act(self.conv(x))
        edges = ctx.edge_index_with_self_loops if self.self_loops else ctx.edge_index
        return self.act(self.conv(x, edges))


register_common_ops(POOL)


class GCNOp(nn.Module):
    """GCNConv (Kipf & Welling, ICLR 2017, Eq. 2): act(D^-1/2 (A+I) D^-1/2 X W + b).

    Shapes:
        - x: [N, dim]
        - output: [N, dim]
    """

    def __init__(self, dim: int, act: str):
        super().__init__()
        self.conv = gnn.GCNConv(dim, dim, normalize=False)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        # GCNConv's own forward (lin, propagate, bias) with the cached propagation matrix
        return self.act(ctx.propagate("gcn_adj", self.conv.lin(x)) + self.conv.bias)


class SGOp(nn.Module):
    """SGConv (Wu et al., ICML 2019, Eq. 8): act(S^K X W + b) with S = D^-1/2 (A+I) D^-1/2.

    Shapes:
        - x: [N, dim]
        - output: [N, dim]
    """

    def __init__(self, dim: int, act: str, K: int = 2):
        super().__init__()
        self.conv = gnn.SGConv(dim, dim, K=K)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        for _ in range(self.conv.K):
            x = ctx.propagate("gcn_adj", x)
        return self.act(self.conv.lin(x))


class ChebOp(nn.Module):
    """ChebConv (Defferrard et al., NeurIPS 2016, Eq. 4) with K = 2 and lambda_max = 2.

    With the symmetric normalisation, T_0 = x and T_1 = L~ x where
    L~ = 2L/lambda_max - I (= -D^-1/2 A D^-1/2 on an undirected graph), so
    ``out = Theta_0 x + Theta_1 L~ x + b``.

    Shapes:
        - x: [N, dim]
        - output: [N, dim]
    """

    def __init__(self, dim: int, act: str):
        super().__init__()
        self.conv = gnn.ChebConv(dim, dim, K=2)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        out = self.conv.lins[0](x) + self.conv.lins[1](ctx.propagate("cheb_laplacian", x))
        return self.act(out + self.conv.bias)


class ARMAOp(nn.Module):
    """ARMAConv (Bianchi et al., 2019, Eq. 11) with one stack of one layer:
    act(sigma(A~ X W + X V + b)), A~ = D^-1/2 A D^-1/2 and sigma = ReLU (ARMA's own).

    Shapes:
        - x: [N, dim]
        - output: [N, dim]
    """

    def __init__(self, dim: int, act: str):
        super().__init__()
        self.conv = gnn.ARMAConv(dim, dim, num_stacks=1, num_layers=1)
        self.act = activation(act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        c = self.conv
        out = ctx.propagate("sym_adj", x @ c.init_weight[0]) + x @ c.root_weight[0][0] + c.bias[0][0]
        return self.act(c.act(out))


@register_op(POOL, "gcn")
def gcn(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """GCNConv (Kipf & Welling, ICLR 2017): D^-1/2 (A+I) D^-1/2 X W."""
    return GCNOp(dim, act)


@register_op(POOL, "sage")
def sage(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """SAGEConv (Hamilton et al., NeurIPS 2017), mean aggregator: W1 x_i + W2 mean_j x_j."""
    return PyGOp(gnn.SAGEConv(dim, dim), act)


def _gat(heads: int):
    def factory(dim: int, *, act: str = "elu", attn_dropout: float = 0.0, **_: object) -> nn.Module:
        concat = dim % heads == 0
        out = dim // heads if concat else dim
        conv = gnn.GATConv(dim, out, heads=heads, concat=concat, dropout=attn_dropout, add_self_loops=False)
        return PyGOp(conv, act, self_loops=True)

    factory.__doc__ = (f"GATConv (Velickovic et al., ICLR 2018) with {heads} head(s), concatenated "
                       f"(averaged when the hidden size is not divisible by {heads}).")
    return factory


for _h in GAT_HEADS:
    register_op(POOL, f"gat_{_h}")(_gat(_h))


@register_op(POOL, "linear")
def linear(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """Linear: x W + b, ignoring the graph."""
    return PyGOp(nn.Linear(dim, dim), act, uses_edges=False)


@register_op(POOL, "arma")
def arma(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """ARMAConv (Bianchi et al., 2019), one stack, one layer."""
    return ARMAOp(dim, act)


@register_op(POOL, "cheb")
def cheb(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """ChebConv (Defferrard et al., NeurIPS 2016) with K = 2 Chebyshev terms."""
    return ChebOp(dim, act)


@register_op(POOL, "sg")
def sg(dim: int, *, act: str = "elu", **_: object) -> nn.Module:
    """SGConv (Wu et al., ICML 2019): (D^-1/2 (A+I) D^-1/2)^K X W with K = 2."""
    return SGOp(dim, act)
