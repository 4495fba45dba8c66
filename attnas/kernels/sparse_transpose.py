"""Kernel ``sparse_transpose``: sparse products of AutoAttend's graph operations whose backward
pass reuses a cached transpose. Pure PyTorch.

A graph operation propagates with ``M @ h`` for a normalised adjacency ``M`` (sparse CSR) and
a layer-1 operation projects the raw sparse features, ``X W^T``. Their backward passes need
``M^T @ grad`` and ``X^T @ grad``; autograd converts ``M`` (or ``X``) to the transposed CSR
form on every step. Neither changes while the graph does, so here the transposes are made once
per graph: ``M^T`` memoised on the
:class:`~attnas.ops.autoattend.graph_context.GraphContext`, ``X^T`` held by
:class:`~attnas.ops.autoattend.graph_context.SparseFeatures`. Overrides the hooks
``graph_propagate`` (:meth:`GraphContext.propagate`, while ``x`` needs a gradient) and
``sparse_project`` (:func:`~attnas.ops.autoattend.graph_context.project` of
:class:`SparseFeatures`). Values and gradients equal autograd's up to summation order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from attnas.ops import overrides

if TYPE_CHECKING:  # graph_context needs torch_geometric (attnas[graph]); kernels load without it
    from attnas.ops.autoattend.graph_context import GraphContext, SparseFeatures


class _CachedTransposeSpMM(torch.autograd.Function):
    """``M @ x`` whose backward uses a given ``M^T`` (CSR) instead of converting ``M`` each step."""

    @staticmethod
    def forward(ctx, m: torch.Tensor, m_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.m_t = m_t
        return m @ x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, None, ctx.m_t @ grad


class _SparseProject(torch.autograd.Function):
    """``rows @ W^T`` whose weight gradient uses the given transpose ``rows_t`` (no gradient to the features)."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, rows_t: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.rows_t = rows_t
        return rows @ weight.t()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, None, (ctx.rows_t @ grad).t()


def propagate(graph: GraphContext, name: str, x: torch.Tensor) -> torch.Tensor:
    """Override of :meth:`GraphContext.propagate` (while ``x`` needs a gradient)."""
    if not (x.requires_grad and torch.is_grad_enabled()):
        return NotImplemented
    m = getattr(graph, name)
    if not isinstance(m, torch.Tensor) or m.layout != torch.sparse_csr:
        return NotImplemented  # an edge list while torch.export traces
    m_t = graph.memo(name + "_t", lambda: m.t().to_sparse_csr())
    return _CachedTransposeSpMM.apply(m, m_t, x)


def project(x: torch.Tensor | SparseFeatures, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Override of :func:`attnas.ops.autoattend.graph_context.project` for :class:`SparseFeatures`."""
    from attnas.ops.autoattend.graph_context import SparseFeatures  # imported by the caller already

    if not isinstance(x, SparseFeatures):
        return NotImplemented
    out = _SparseProject.apply(x.rows, x.rows_t, weight)
    return out if bias is None else out + bias


overrides.register("graph_propagate", "sparse_transpose", propagate)
overrides.register("sparse_project", "sparse_transpose", project)
