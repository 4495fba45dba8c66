"""Hand-designed graph networks with their standard settings, as one-point "spaces".

Used with the ``fixed`` strategy to run the baselines of AutoAttend's Table 5 in the
same harness as the searched models:

- ``gcn``: Kipf & Welling, ICLR 2017: two GCNConv layers, hidden 16, ReLU, dropout 0.5.
- ``gat``: Velickovic et al., ICLR 2018: 8 heads x 8 hidden units with ELU, then an
  output GATConv with 1 head (8 heads averaged on PubMed); dropout 0.6 on inputs and
  attention coefficients.

``choices`` layout: ``{"model": "gcn"}`` or ``{"model": "gat"}``; sizes come from the
space options, whose defaults are the papers' settings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnas.config import CheckedConfig, Fraction, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, unknown_name
from attnas.ops.shared.dropout import fast_dropout
from attnas.registry import register_space
from attnas.spaces.base import Space

MODELS = ("gcn", "gat")


@dataclass(frozen=True)
class GNNBaselineConfig(CheckedConfig):
    """Options (defaults: the papers' Cora settings).

    Attributes:
        gcn_hidden: GCN hidden units.
        gcn_dropout: GCN dropout.
        gat_hidden: GAT hidden units per head.
        gat_heads: GAT first-layer heads.
        gat_out_heads: GAT output heads (averaged).
        gat_dropout: GAT dropout on inputs and attention coefficients.
    """

    gcn_hidden: PositiveInt = 16
    gcn_dropout: Fraction = 0.5
    gat_hidden: PositiveInt = 8
    gat_heads: PositiveInt = 8
    gat_out_heads: PositiveInt = 1
    gat_dropout: Fraction = 0.6


class TwoLayer(nn.Module):
    """``conv2(dropout(act(conv1(dropout(x)))))``: graph layers are called with the edges,
    ``nn.Linear`` without; ``act`` is ReLU unless a subclass says otherwise."""

    act = staticmethod(F.relu)

    def __init__(self, conv1: nn.Module, conv2: nn.Module, dropout: float):
        super().__init__()
        self.conv1, self.conv2, self.p = conv1, conv2, dropout

    def _layer(self, conv: nn.Module, x: torch.Tensor, batch: Any) -> torch.Tensor:
        return conv(x) if isinstance(conv, nn.Linear) else conv(x, batch.edge_index)

    def forward(self, batch: Any) -> torch.Tensor:
        """Node logits of a graph.

        Args:
            batch: A graph with ``x``, float ``[N, in_dim]`` node features, and ``edge_index``,
                int64 ``[2, E]`` edges (source row, target row): a torch_geometric ``Data`` or
                ``Batch``, or the node-classification task's ``NodeBatch``.

        Returns:
            ``[N, classes]`` logits.
        """
        x = fast_dropout(batch.x, self.p, self.training)
        x = self.act(self._layer(self.conv1, x, batch))
        x = fast_dropout(x, self.p, self.training)
        return self._layer(self.conv2, x, batch)


class GCN(TwoLayer):
    """Two-layer GCN (Kipf & Welling, 2017, Eq. 9): softmax(A relu(A X W0) W1)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float):
        from torch_geometric import nn as gnn  # attnas[graph], imported when a network is built

        super().__init__(gnn.GCNConv(in_dim, hidden), gnn.GCNConv(hidden, out_dim), dropout)


class GAT(TwoLayer):
    """Two-layer GAT (Velickovic et al., 2018, Sec. 3.3 transductive setting).

    With ``separate=True``, GAT-sep (Platonov et al., ICLR 2023): each layer attends over the
    neighbours only and adds the node's own features through a separate weight
    (``GATConv(add_self_loops=False, residual=True)``).
    """

    act = staticmethod(F.elu)

    def __init__(self, in_dim: int, hidden: int, heads: int, out_dim: int, out_heads: int, dropout: float,
                 separate: bool = False):
        from torch_geometric import nn as gnn  # attnas[graph], imported when a network is built

        kw = {"add_self_loops": not separate, "residual": separate, "dropout": dropout}
        conv1 = gnn.GATConv(in_dim, hidden, heads=heads, **kw)
        conv2 = gnn.GATConv(hidden * heads, out_dim, heads=out_heads, concat=False, **kw)
        super().__init__(conv1, conv2, dropout)


@register_space("gnn-baseline")
class GNNBaselineSpace(Space):
    """GCN and GAT with their standard settings (for the ``fixed`` strategy)."""

    name = "gnn-baseline"
    Config = GNNBaselineConfig
    capabilities = frozenset({"dag"})
    task_kinds = ("node",)
    models: tuple[str, ...] = MODELS

    def sample(self, rng: random.Random) -> Arch:
        return self.arch({"model": rng.choice(self.models)})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        return self.arch({"model": rng.choice([m for m in self.models if m != arch.choices["model"]])})

    def validate(self, arch: Arch) -> None:
        super().validate(arch)
        if set(arch.choices) != {"model"}:
            raise ArchError(f"choices must be {{'model': ...}}, got keys {sorted(arch.choices)}")
        if arch.choices["model"] not in self.models:
            raise ArchError(unknown_name("baseline model", arch.choices["model"], self.models))

    def size(self) -> int:
        return len(self.models)

    def build(self, arch: Arch, task: Any) -> nn.Module:
        self.validate(arch)
        o, info = self.options, task.info
        if arch.choices["model"] == "gcn":
            return GCN(info.in_dim, o.gcn_hidden, info.num_classes, o.gcn_dropout)
        return GAT(info.in_dim, o.gat_hidden, o.gat_heads, info.num_classes, o.gat_out_heads, o.gat_dropout)

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        labels = ["input", arch.choices["model"], arch.choices["model"], "output"]
        adj = np.eye(4, k=1, dtype=np.int64)
        return adj, labels
