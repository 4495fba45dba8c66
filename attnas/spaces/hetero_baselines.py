"""Hand-designed GNNs for heterophilous graphs, with their papers' settings, as one-point "spaces".

The baselines that ``attnas compare`` trains against the search in the ``hetero`` pool
(:meth:`~attnas.spaces.autoattend.AutoAttendSpace.baselines`); all are two propagation
layers deep unless the paper says otherwise, hidden 64, dropout 0.5:

- ``mlp``: the graph ignored, ``W2 relu(W1 x)``.
- ``gcn``: Kipf & Welling, ICLR 2017.
- ``gat``: Velickovic et al., ICLR 2018: 8 heads x 8 units, dropout 0.6.
- ``sage``: GraphSAGE (Hamilton et al., NeurIPS 2017), mean aggregator.
- ``gat_sep``: GAT-sep (Platonov et al., ICLR 2023): GAT over the neighbours plus a separate
  weight for the node itself, 8 heads x 8 units.
- ``h2gcn``: H2GCN (Zhu et al., NeurIPS 2020): ego embedding, 1- and strict 2-hop
  neighbourhoods aggregated apart without self-loops, every round's output concatenated.
- ``gprgnn``: GPR-GNN (Chien et al., ICLR 2021): a 2-layer MLP, then K = 10 hops of
  generalized PageRank with learned signed weights (PPR init, alpha = 0.1), dropout 0.5
  before the propagation (``dprate``).
- ``fagcn``: FAGCN (Bo et al., AAAI 2021): MLP embedding, 2 FAConv layers with
  eps = 0.3 (signed tanh attention plus eps x the embedding), linear classifier.

``choices`` layout: ``{"model": "<name>"}``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric import nn as gnn

from attnas.config import CheckedConfig, Fraction, PositiveInt
from attnas.core.arch import Arch
from attnas.ops.autoattend.graph_context import GraphContext
from attnas.ops.autoattend.graph_heterophily import GPRPropagation
from attnas.ops.shared.dropout import fast_dropout
from attnas.registry import register_space
from attnas.spaces.gnn_baselines import GAT, GCN, GNNBaselineSpace, TwoLayer

#: The baselines and their one-line descriptions for the comparison table.
DESCRIPTIONS = {
    "mlp": "MLP (2 layers, hidden 64, dropout 0.5)",
    "gcn": "GCN (Kipf & Welling 2017; hidden 64, dropout 0.5)",
    "gat": "GAT (Velickovic et al. 2018; 8 heads x 8 units, dropout 0.6)",
    "sage": "GraphSAGE (Hamilton et al. 2017; mean, hidden 64, dropout 0.5)",
    "gat_sep": "GAT-sep (Platonov et al. 2023; 8 heads x 8 units, ego kept apart, dropout 0.6)",
    "h2gcn": "H2GCN-1 (Zhu et al. 2020; hidden 64, 2 rounds, 1- and 2-hop apart)",
    "gprgnn": "GPR-GNN (Chien et al. 2021; MLP hidden 64, K=10, PPR init alpha 0.1)",
    "fagcn": "FAGCN (Bo et al. 2021; hidden 64, 2 layers, eps 0.3)",
}
MODELS = tuple(DESCRIPTIONS)


@dataclass(frozen=True)
class HeteroBaselineConfig(CheckedConfig):
    """Options (defaults: the papers' settings).

    Attributes:
        hidden: Hidden units (GAT and GAT-sep: heads x units per head).
        dropout: Dropout on the inputs and between layers.
        gat_heads: First-layer heads of GAT and GAT-sep.
        gat_dropout: GAT's and GAT-sep's dropout (inputs and coefficients).
        gpr_hops: GPR-GNN's K.
        gpr_alpha: GPR-GNN's PPR initialisation alpha.
        fagcn_eps: FAGCN's eps.
        fagcn_layers: FAGCN's propagation layers.
    """

    hidden: PositiveInt = 64
    dropout: Fraction = 0.5
    gat_heads: PositiveInt = 8
    gat_dropout: Fraction = 0.6
    gpr_hops: PositiveInt = 10
    gpr_alpha: Fraction = 0.1
    fagcn_eps: Fraction = 0.3
    fagcn_layers: PositiveInt = 2


class MLP(TwoLayer):
    """Two-layer perceptron ``W2 dropout(relu(W1 dropout(x) + b1)) + b2`` (the graph ignored)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float):
        super().__init__(nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim), dropout)


class SAGE(TwoLayer):
    """Two-layer GraphSAGE, mean aggregator (Hamilton et al., NeurIPS 2017, Alg. 1):
    ``h'_v = W_l mean_{u in N(v)} h_u + W_r h_v + b``."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float):
        super().__init__(gnn.SAGEConv(in_dim, hidden), gnn.SAGEConv(hidden, out_dim), dropout)


def h2gcn_adjacencies(edge_index: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """H2GCN's normalised 1-hop and strict 2-hop adjacencies ``D^-1/2 A_k D^-1/2`` (no self-loops), as CSR.

    The strict 2-hop neighbours of v are the nodes two hops away that are neither v nor
    its 1-hop neighbours (Zhu et al., NeurIPS 2020, Sec. 3.1, design D2).
    """
    from torch_geometric.utils import coalesce, remove_self_loops

    ei, _ = remove_self_loops(coalesce(edge_index, num_nodes=n))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse")
        a1 = torch.sparse_coo_tensor(ei, torch.ones(ei.size(1)), (n, n), check_invariants=False).coalesce()
        a2 = torch.sparse.mm(a1, a1).coalesce()
    i2 = a2.indices()
    key = lambda idx: idx[0] * n + idx[1]  # noqa: E731
    keep = (i2[0] != i2[1]) & ~torch.isin(key(i2), key(ei))
    out = []
    for idx in (ei, i2[:, keep]):
        deg = torch.zeros(n).index_add_(0, idx[0], torch.ones(idx.size(1))).clamp_min(1)
        w = deg[idx[0]].rsqrt() * deg[idx[1]].rsqrt()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse")
            out.append(torch.sparse_coo_tensor(idx, w, (n, n), check_invariants=False).coalesce().to_sparse_csr())
    return out[0], out[1]


class H2GCN(nn.Module):
    """H2GCN-1 (Zhu et al., NeurIPS 2020, Eq. 5-8):

    ``r0 = relu(x W_e)``; ``r_k = [A1 r_{k-1} || A2 r_{k-1}]`` for k = 1..K (A1, A2: normalised
    1-hop and strict 2-hop adjacencies, no self-loops); ``logits = W_c dropout([r0 || r1 || ... || rK])``.
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float, rounds: int = 2):
        super().__init__()
        self.embed = nn.Linear(in_dim, hidden, bias=False)
        self.rounds, self.p = rounds, dropout
        self.classify = nn.Linear(hidden * (2 ** (rounds + 1) - 1), out_dim)

    def forward(self, batch: Any) -> torch.Tensor:
        cache = getattr(batch, "cache", {})
        if "h2gcn_adj" not in cache:
            cache["h2gcn_adj"] = h2gcn_adjacencies(batch.edge_index.cpu(), batch.x.size(0))
        a1, a2 = (a.to(batch.x.device) for a in cache["h2gcn_adj"])
        r = F.relu(self.embed(fast_dropout(batch.x, self.p, self.training)))
        reps = [r]
        for _ in range(self.rounds):
            r = torch.cat([a1 @ r, a2 @ r], dim=1)
            reps.append(r)
        return self.classify(fast_dropout(torch.cat(reps, dim=1), self.p, self.training))


class GPRGNN(nn.Module):
    """GPR-GNN (Chien et al., ICLR 2021, Eq. 2): ``Z = sum_k gamma_k A~^k MLP(x)``, dropout ``p`` before the propagation."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float, hops: int = 10, alpha: float = 0.1):
        super().__init__()
        self.mlp = MLP(in_dim, hidden, out_dim, dropout)
        self.prop = GPRPropagation(hops, alpha)
        self.p = dropout

    def forward(self, batch: Any) -> torch.Tensor:
        h = fast_dropout(self.mlp(batch), self.p, self.training)
        return self.prop(h, GraphContext(batch.edge_index, batch.x.size(0), getattr(batch, "cache", {})))


class FAGCN(nn.Module):
    """FAGCN (Bo et al., AAAI 2021, Eq. 7-9): ``z = relu(W1 x)``; ``h <- FAConv(h, z)`` ``layers`` times
    (``h'_v = eps z_v + sum_u tanh(a . [h_v || h_u]) h_u / sqrt(d_u d_v)``); ``logits = W2 h``."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float, eps: float = 0.3, layers: int = 2):
        super().__init__()
        self.lin1, self.lin2, self.p = nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim), dropout
        self.convs = nn.ModuleList(gnn.FAConv(hidden, eps=eps, dropout=dropout) for _ in range(layers))

    def forward(self, batch: Any) -> torch.Tensor:
        z = fast_dropout(F.relu(self.lin1(fast_dropout(batch.x, self.p, self.training))), self.p, self.training)
        h = z
        for conv in self.convs:
            h = conv(h, z, batch.edge_index)
        return self.lin2(h)


@register_space("hetero-baseline")
class HeteroBaselineSpace(GNNBaselineSpace):
    """MLP, GCN, GAT, GraphSAGE, GAT-sep, H2GCN, GPR-GNN and FAGCN with their papers' settings."""

    name = "hetero-baseline"
    Config = HeteroBaselineConfig
    models = MODELS

    def build(self, arch: Arch, task: Any) -> nn.Module:
        self.validate(arch)
        o, info = self.options, task.info
        i, h, c, p = info.in_dim, o.hidden, info.num_classes, o.dropout
        m = arch.choices["model"]
        if m in ("gat", "gat_sep"):
            return GAT(i, h // o.gat_heads, o.gat_heads, c, 1, o.gat_dropout, separate=m == "gat_sep")
        if m == "gprgnn":
            return GPRGNN(i, h, c, p, o.gpr_hops, o.gpr_alpha)
        if m == "fagcn":
            return FAGCN(i, h, c, p, o.fagcn_eps, o.fagcn_layers)
        return {"mlp": MLP, "gcn": GCN, "sage": SAGE, "h2gcn": H2GCN}[m](i, h, c, p)
