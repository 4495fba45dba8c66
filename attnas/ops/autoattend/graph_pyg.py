"""The Cora / PPI operation pool of AutoAttend: stand-alone graph convolutions from torch_geometric.

Guan et al., ICML 2021, Sec. 5.2.1: "zero, identity, GCNConv (Kipf & Welling, 2017),
SageConv (Hamilton et al., 2017), GATConv (Velickovic et al., 2018) with head number in
{1, 2, 4, 8, 16}, Linear, ARMAConv (Bianchi et al., 2019), ChebConv (Defferrard et al.,
2016), SGConv (Wu et al., 2019)". Each parametric operation is the torch_geometric
layer followed by the space's activation.

Factories take ``(in_dim, out_dim=in_dim, *, act, attn_dropout, **_)`` and return a
module with ``forward(x, ctx) -> [N, out_dim]``. ``x`` may be a sparse CSR matrix (the
raw bag-of-words features a layer-1 operation reads): every operation starts with a
linear map of its input (:func:`~attnas.ops.autoattend.graph_context.project`), written before the
propagation where the layer propagates first (SG, Cheb, SAGE; the same function, since
both are linear).

The layers hold their parameters in the torch_geometric modules (same names, shapes and
initialisation); their propagation uses the normalised adjacencies the
:class:`GraphContext` caches per graph (one sparse product instead of re-normalising the
edges on every call). Tests check each against the torch_geometric layer's own ``forward``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric import nn as gnn
from torch_geometric.utils import softmax

from attnas.registry import register_op
from attnas.ops.autoattend.common import activation, register_common_ops
from attnas.ops.shared.dropout import fast_dropout
from attnas.ops.autoattend.graph_context import GraphContext, project

POOL = "pyg"
GAT_HEADS = (1, 2, 4, 8, 16)


register_common_ops(POOL)


class GraphOp(nn.Module):
    """A parametric operation of the pool: one torch_geometric layer's weights (``self.conv``),
    applied with the graph's cached matrices, then the space's activation ``act``.

    Shapes:
        - x: [N, in_dim]
        - output: [N, out_dim]
    """

    def __init__(self, conv: nn.Module, act: str):
        super().__init__()
        self.conv = conv
        self.act = activation(act)


class GCNOp(GraphOp):
    """GCNConv (Kipf & Welling, ICLR 2017, Eq. 2): act(D^-1/2 (A+I) D^-1/2 X W + b)."""

    def __init__(self, in_dim: int, out_dim: int, act: str):
        super().__init__(gnn.GCNConv(in_dim, out_dim, normalize=False), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        return self.act(ctx.propagate("gcn_adj", project(x, self.conv.lin.weight)) + self.conv.bias)


class SAGEOp(GraphOp):
    """SAGEConv (Hamilton et al., NeurIPS 2017, Alg. 1, mean aggregator, as torch_geometric):
    act(W_l mean_{u in N(v)} h_u + b + W_r h_v)."""

    def __init__(self, in_dim: int, out_dim: int, act: str):
        super().__init__(gnn.SAGEConv(in_dim, out_dim), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        c = self.conv
        neighbours = ctx.propagate("mean_adj", project(x, c.lin_l.weight)) + c.lin_l.bias
        return self.act(neighbours + project(x, c.lin_r.weight))


class GATOp(GraphOp):
    """GATConv (Velickovic et al., ICLR 2018, Eq. 3-6) with ``heads`` heads, then ``act``:

    ``alpha_vu = softmax_u(leaky_relu(a_src . W h_u + a_dst . W h_v))`` over the neighbours of
    v and v itself, ``h'_v = ||_k sum_u alpha^k_vu W^k h_u`` (heads averaged instead of
    concatenated when ``out_dim`` is not divisible by ``heads``) plus a bias; dropout
    ``attn_dropout`` on the coefficients in training.

    With ``separate=True`` it is GAT-sep (Platonov et al., ICLR 2023, Sec. 4): the node itself
    is left out of the attention (no self-loops) and enters through its own weight,
    ``h'_v = W_r h_v + ||_k sum_{u in N(v)} alpha^k_vu W^k h_u`` (torch_geometric's
    ``GATConv(add_self_loops=False, residual=True)``), so a node's own features are never
    averaged away by dissimilar neighbours.
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int, act: str, attn_dropout: float, separate: bool = False):
        concat = out_dim % heads == 0
        super().__init__(gnn.GATConv(in_dim, out_dim // heads if concat else out_dim, heads=heads, concat=concat,
                                     dropout=attn_dropout, add_self_loops=False, residual=separate), act)
        self.separate = separate

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        c = self.conv
        n = x.size(0)
        src, dst = ctx.edge_index if self.separate else ctx.edge_index_with_self_loops
        wh = project(x, c.lin.weight).view(n, c.heads, c.out_channels)
        a_src, a_dst = (wh * c.att_src).sum(-1), (wh * c.att_dst).sum(-1)  # [N, heads]
        alpha = softmax(F.leaky_relu(a_src[src] + a_dst[dst], c.negative_slope), dst, num_nodes=n)
        alpha = fast_dropout(alpha, c.dropout, self.training)
        out = torch.zeros_like(wh).index_add_(0, dst, wh.index_select(0, src) * alpha.unsqueeze(-1))
        out = out.reshape(n, -1) if c.concat else out.mean(1)
        if self.separate:
            out = out + project(x, c.res.weight)
        return self.act(out + c.bias)


class LinearOp(GraphOp):
    """Linear: act(x W + b), ignoring the graph."""

    def __init__(self, in_dim: int, out_dim: int, act: str):
        super().__init__(nn.Linear(in_dim, out_dim), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        return self.act(project(x, self.conv.weight, self.conv.bias))


class SGOp(GraphOp):
    """SGConv (Wu et al., ICML 2019, Eq. 8): act(S^K X W + b) with S = D^-1/2 (A+I) D^-1/2."""

    def __init__(self, in_dim: int, out_dim: int, act: str, K: int = 2):
        super().__init__(gnn.SGConv(in_dim, out_dim, K=K), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        h = project(x, self.conv.lin.weight)
        for _ in range(self.conv.K):
            h = ctx.propagate("gcn_adj", h)
        return self.act(h + self.conv.lin.bias)


class ChebOp(GraphOp):
    """ChebConv (Defferrard et al., NeurIPS 2016, Eq. 4) with K = 2 and lambda_max = 2.

    With the symmetric normalisation, T_0 = x and T_1 = L~ x where
    L~ = 2L/lambda_max - I (= -D^-1/2 A D^-1/2 on an undirected graph), so
    ``out = Theta_0 x + Theta_1 L~ x + b``.
    """

    def __init__(self, in_dim: int, out_dim: int, act: str):
        super().__init__(gnn.ChebConv(in_dim, out_dim, K=2), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        lins = self.conv.lins
        out = project(x, lins[0].weight) + ctx.propagate("cheb_laplacian", project(x, lins[1].weight))
        return self.act(out + self.conv.bias)


class ARMAOp(GraphOp):
    """ARMAConv (Bianchi et al., 2019, Eq. 11) with one stack of one layer:
    act(sigma(A~ X W + X V + b)), A~ = D^-1/2 A D^-1/2 and sigma = ReLU (ARMA's own)."""

    def __init__(self, in_dim: int, out_dim: int, act: str):
        super().__init__(gnn.ARMAConv(in_dim, out_dim, num_stacks=1, num_layers=1), act)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        c = self.conv
        out = ctx.propagate("sym_adj", project(x, c.init_weight[0].t())) + project(x, c.root_weight[0][0].t())
        return self.act(c.act(out + c.bias[0][0]))


#: The pool's single-layer operations: name -> (module, description).
_OPS: dict[str, tuple[type[GraphOp], str]] = {
    "gcn": (GCNOp, "GCNConv (Kipf & Welling, ICLR 2017): D^-1/2 (A+I) D^-1/2 X W."),
    "sage": (SAGEOp, "SAGEConv (Hamilton et al., NeurIPS 2017), mean aggregator: W1 x_i + W2 mean_j x_j."),
    "linear": (LinearOp, "Linear: x W + b, ignoring the graph."),
    "arma": (ARMAOp, "ARMAConv (Bianchi et al., 2019), one stack, one layer."),
    "cheb": (ChebOp, "ChebConv (Defferrard et al., NeurIPS 2016) with K = 2 Chebyshev terms."),
    "sg": (SGOp, "SGConv (Wu et al., ICML 2019): (D^-1/2 (A+I) D^-1/2)^K X W with K = 2."),
}


def _factory(name: str):
    """The factory ``(in_dim, out_dim=in_dim, *, act) -> module`` of the operation ``name``."""
    module, description = _OPS[name]

    def factory(in_dim: int, out_dim: int | None = None, *, act: str = "elu", **_: object) -> nn.Module:
        return module(in_dim, out_dim or in_dim, act)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = description
    return factory


def _gat(heads: int):
    def factory(in_dim: int, out_dim: int | None = None, *, act: str = "elu", attn_dropout: float = 0.0,
                **_: object) -> nn.Module:
        return GATOp(in_dim, out_dim or in_dim, heads, act, attn_dropout)

    factory.__doc__ = (f"GATConv (Velickovic et al., ICLR 2018) with {heads} head(s), concatenated "
                       f"(averaged when the output size is not divisible by {heads}).")
    return factory


for _h in GAT_HEADS:
    register_op(POOL, f"gat_{_h}")(_gat(_h))


#: The factories of :data:`_OPS` by name (the heterophily pool registers some of them too).
FACTORIES = {name: _factory(name) for name in _OPS}
for _name, _make in FACTORIES.items():
    register_op(POOL, _name)(_make)
