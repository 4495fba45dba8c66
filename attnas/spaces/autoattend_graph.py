"""AutoAttend on graphs: the stem, head, attention layer and operations for node classification.

Layer 0 is the node features after dropout: with ``space.stem: raw`` the features
themselves (sparse when they are mostly zeros), which the layer-1 operations map to the
hidden size; with ``stem: project`` a linear projection to the hidden size shared by all
architectures (as AutoGL's AutoAttend does). The head is a linear classifier with
``space.head: linear``, and nothing with ``head: none``, where the last layer's
operations output the class scores. The attention layer is
:class:`~attnas.ops.autoattend.graph_attention.EdgeScaledDotProductAttention` (Eq. 8, h = 4).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from attnas import registry
from attnas.core.errors import ConfigError
from attnas.ops.autoattend.graph_attention import EdgeScaledDotProductAttention
from attnas.ops.autoattend.graph_context import GraphContext, SparseFeatures
from attnas.ops.shared.dropout import fast_dropout
from attnas.spaces.autoattend_networks import register_adapter
from attnas.tasks.base import TaskInfo


class GraphStem(nn.Module):
    """Layer 0: ``dropout(x)`` (``project=False``) or ``W dropout(x) + b``, and the graph context.

    Sparse features (``batch.sparse_x``) stay a sparse CSR matrix; dropout acts on their
    non-zero values only, which is the same distribution as dense dropout, and the
    projection (or the layer-1 operations) multiply it as a sparse-dense product.

    Shapes:
        - batch.x: [N, F]
        - output: ([N, hidden] or [N, F] (dense or :class:`SparseFeatures`), GraphContext)
    """

    def __init__(self, in_dim: int, hidden: int, dropout: float, project: bool = True):
        super().__init__()
        self.p = dropout
        self.in_dim = in_dim
        self.proj = nn.Linear(in_dim, hidden) if project else None

    def forward(self, batch: Any) -> tuple[torch.Tensor, GraphContext]:
        ctx = GraphContext(batch.edge_index, batch.x.size(0), getattr(batch, "cache", {}))
        sparse = getattr(batch, "sparse_x", None)
        if sparse is None:
            x = fast_dropout(batch.x, self.p, self.training)
            return (x if self.proj is None else self.proj(x)), ctx
        cols, offsets, values = sparse
        values = fast_dropout(values, self.p, self.training)
        if self.proj is None:
            return SparseFeatures.from_rows(cols, offsets, values, self.in_dim, ctx.cache), ctx
        crow = torch.cat([offsets, offsets.new_tensor([cols.numel()])])
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            x = torch.sparse_csr_tensor(crow, cols, values, (batch.x.size(0), self.in_dim), check_invariants=False)
        # a sparse-dense product: bit-identical to embedding_bag(mode="sum") here, 2-5x faster
        return x @ self.proj.weight.t() + self.proj.bias, ctx


class GraphHead(nn.Module):
    """``logits = W h + b``."""

    def __init__(self, hidden: int, num_classes: int):
        super().__init__()
        self.lin = nn.Linear(hidden, num_classes)

    def forward(self, h: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        return self.lin(h)


class ScoresHead(nn.Module):
    """The last layer already holds the class scores (``space.head: none``)."""

    def forward(self, h: torch.Tensor, ctx: GraphContext) -> torch.Tensor:
        return h


@register_adapter("node")
class GraphAdapter:
    """Builds the graph pieces of an AutoAttend network from the space's options."""

    def __init__(self, space: Any, info: TaskInfo):
        self.opts = space.options
        self.info = info
        for key in self.opts.options or {}:  # the free-form mapping holds other domains' options
            if key == "baselines" and self.opts.pool == "hetero":
                continue  # the hetero pool's tuned baseline settings (AutoAttendSpace.baselines)
            raise ConfigError(f"space.options.{key}: unknown option; AutoAttend's graph networks take no "
                              "space.options other than the hetero pool's 'baselines' (the others are text options)")

    def stem(self) -> nn.Module:
        return GraphStem(self.info.in_dim, self.opts.hidden, self.opts.dropout, project=self.opts.stem == "project")

    def head(self) -> nn.Module:
        if self.opts.head == "none":
            return ScoresHead()
        return GraphHead(self.opts.hidden, self.info.num_classes)

    def attention(self) -> nn.Module:
        return EdgeScaledDotProductAttention(self.opts.heads, self.opts.attn_dropout, qk_norm=self.opts.qk_norm)

    def op(self, name: str, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        """Operation ``name`` of the space's pool, ``in_dim -> out_dim``; on a last layer of class
        scores (``head: none``) with the activation ``out_act``."""
        factory = registry.get("op", name, group=self.opts.pool)
        act = self.opts.out_act if last and self.opts.head == "none" else self.opts.act
        return factory(in_dim, out_dim, act=act, attn_dropout=self.opts.attn_dropout, op_heads=self.opts.op_heads,
                       last=last)
