"""The CiteSeer / PubMed operation pool of AutoAttend: multi-head message passing (Eq. 7).

Guan et al., ICML 2021, Sec. 5.2.1 and Table 3, borrowing the correlation
coefficients of GraphNAS (Gao et al., IJCAI 2020):

.. math::
    \\mathbf{h}_v^{out} = \\sigma\\Big(\\operatorname{Merge}_{i=1}^{h_m}
        \\sum_{u \\in N(v)} e_{uv,i}\\, \\mathbf{W}_i \\mathbf{h}_u\\Big)

with h_m = 4 heads, sigma = tanh, Merge = concatenation (sum on the last layer), and
the coefficient e_uv,i one of

=============  ===============================================================
const          e = 1
gcn            e = 1 / sqrt(d_u d_v)
gat            e = leaky_relu(a_l . W h_u + a_r . W h_v)
sym_gat        e = e^gat_uv + e^gat_vu
cos            e = < a_l * W h_u, a_r * W h_v >
linear         e = tanh(sum(a_l * W h_u))
gene_linear    e = w_a . tanh(a_l * W h_u + a_r * W h_v)
=============  ===============================================================

Every operation of the pool has this form, ``zero`` aside (Sec. 5.2.1): the pool has no
``identity``.

As in GraphNAS, the learned coefficients (gat, sym_gat, cos, linear, gene_linear) are
normalised with a softmax over each node's neighbours, and every node is its own
neighbour (self-loops).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import softmax

from attnas.registry import register_op
from attnas.ops.autoattend.common import activation, register_common_ops
from attnas.ops.shared.dropout import fast_dropout
from attnas.ops.autoattend.graph_context import GraphContext, project

POOL = "mp"
COEFFICIENTS = ("const", "gcn", "gat", "sym_gat", "cos", "linear", "gene_linear")


class CorrelationMessagePassing(nn.Module):
    """One multi-head message-passing operation of Eq. 7 with a given correlation coefficient.

    Args:
        dim: Input size (the input may be a sparse CSR feature matrix).
        coefficient: One of :data:`COEFFICIENTS`.
        heads: Number of heads h_m.
        merge: ``concat`` (each head dim/h_m wide) or ``sum`` (each head dim wide; last layer).
        act: The activation sigma.
        attn_dropout: Dropout on normalised coefficients (GraphNAS samples them stochastically).
        out_dim: Output size (default ``dim``).

    Shapes:
        - x: [N, dim]
        - output: [N, out_dim]
    """

    def __init__(self, dim: int, coefficient: str, heads: int = 4, merge: str = "concat", act: str = "tanh",
                 attn_dropout: float = 0.0, out_dim: int | None = None):
        super().__init__()
        out_dim = out_dim or dim
        if coefficient not in COEFFICIENTS:
            raise ValueError(f"unknown correlation coefficient {coefficient!r}")
        if merge == "concat" and out_dim % heads:
            raise ValueError(f"output size {out_dim} is not divisible by {heads} heads")
        self.coefficient, self.heads, self.merge = coefficient, heads, merge
        self.head_dim = out_dim // heads if merge == "concat" else out_dim
        self.lin = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.act = activation(act)
        self.attn_dropout = attn_dropout
        if coefficient in ("gat", "sym_gat", "cos", "linear", "gene_linear"):
            self.att_l = nn.Parameter(torch.empty(heads, self.head_dim))
            nn.init.xavier_uniform_(self.att_l)
        if coefficient in ("gat", "sym_gat", "cos", "gene_linear"):
            self.att_r = nn.Parameter(torch.empty(heads, self.head_dim))
            nn.init.xavier_uniform_(self.att_r)
        if coefficient == "gene_linear":
            self.att_a = nn.Linear(self.head_dim, 1, bias=False)
        nn.init.xavier_uniform_(self.lin.weight)

    def _coefficients(self, wh: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
        """Softmax-normalised learned coefficients e_uv per edge and head, [E, h]."""
        c = self.coefficient
        wu, wv = wh.index_select(0, src), wh.index_select(0, dst)  # [E, h, d]
        if c in ("gat", "sym_gat"):
            left = (wh * self.att_l).sum(-1)   # a_l . W h per node, [N, h]
            right = (wh * self.att_r).sum(-1)
            e = F.leaky_relu(left[src] + right[dst], 0.2)
            if c == "sym_gat":
                e = e + F.leaky_relu(left[dst] + right[src], 0.2)
        elif c == "cos":
            e = (wu * self.att_l * wv * self.att_r).sum(-1)
        elif c == "linear":
            e = torch.tanh((wu * self.att_l).sum(-1))
        else:  # gene_linear
            e = self.att_a(torch.tanh(wu * self.att_l + wv * self.att_r)).squeeze(-1)
        e = softmax(e, dst, num_nodes=n)
        return fast_dropout(e, self.attn_dropout, self.training)

    def forward(self, x: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        n = x.size(0)
        wh = project(x, self.lin.weight).view(n, self.heads, self.head_dim)
        if self.coefficient in ("const", "gcn"):
            # fixed coefficients, the same for every head: one sparse product for all heads
            adj = "sum_adj" if self.coefficient == "const" else "gcn_adj"
            out = ctx.propagate(adj, wh.reshape(n, -1)).view(n, self.heads, self.head_dim)
        else:
            src, dst = ctx.edge_index_with_self_loops
            e = self._coefficients(wh, src, dst, n)  # [E, h]
            msg = wh.index_select(0, src) * e.unsqueeze(-1)
            out = torch.zeros_like(wh).index_add_(0, dst, msg)
        out = out.reshape(n, -1) if self.merge == "concat" else out.sum(1)
        return self.act(out + self.bias)

    def extra_repr(self) -> str:
        return f"coefficient={self.coefficient}, heads={self.heads}, merge={self.merge}"


register_common_ops(POOL, identity=False)


def _make(coefficient: str):
    def factory(in_dim: int, out_dim: int | None = None, *, op_heads: int = 4, act: str = "tanh",
                attn_dropout: float = 0.0, last: bool = False, **_: object) -> nn.Module:
        return CorrelationMessagePassing(in_dim, coefficient, heads=op_heads, merge="sum" if last else "concat",
                                         act=act, attn_dropout=attn_dropout, out_dim=out_dim)

    factory.__doc__ = f"Eq. 7 multi-head message passing with the '{coefficient}' correlation coefficient."
    return factory


for _c in COEFFICIENTS:
    register_op(POOL, _c)(_make(_c))
