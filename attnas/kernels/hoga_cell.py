r"""Kernel ``hoga_cell``: the discrete HOGA cell (AutoLA Eqs. 2-3) as one autograd operation on the CPU.

No C++ of its own: it calls the kernels ``attention_gates``, ``fused_phi`` and (channels-last)
``layout`` directly, and overrides :meth:`attnas.ops.hoga_cell.HOGA.forward` (hook
``hoga_cell``) where all of them are on and apply.

:class:`~attnas.ops.hoga_cell.HOGA` computes, from the channel groups ``F_k`` of its input,

.. math::
    U_k = o_{kk}(F_k) + \sum_{j < k} o_{jk}(U_j), \qquad
    \hat U = \varphi([U_0; \dots; U_{K-1}; \textstyle\sum_k U_k]).

Run module by module, that is some fifteen autograd operations per cell (the split, one per
gated edge, one per sum of two edge outputs, phi), each with its own Python call, output
tensor and, in the backward, its own gradient tensor that autograd then adds to the others
of the same node. :func:`fused_cell` runs the whole cell as one operation instead:

* forward: the first gated edge into ``U_k`` writes its node, the others add ``x g(x)``
  into it inside their kernel (no output per edge, no separate sum); identity edges are
  added after (``U_k += U_j``, or ``U_k`` is ``U_j`` itself when that is its only term;
  starting the node from an identity edge's source inside the first gate's kernel was no
  faster, within the few-percent noise of an A/B timing of the two);
* backward: phi's backward gives every node's gradient; the nodes are then visited from the
  last to the first, and every edge into ``U_k`` adds its input gradient into ``dU_j`` inside
  its kernel (``dU_j`` is complete before ``U_j``'s own edges are visited, since only nodes
  after ``j`` use ``U_j``); edges from an input group write ``dF_k`` directly, and the
  layout kernel merges the ``dF_k`` into a channels-last gradient.

Same values, gradients and batch-norm running statistics as the module-by-module path (up to
the order of float additions). It applies in training mode on CPU float32 / float64 tensors
(NCHW or channels-last) when every gated edge's compiled kernel and the compiled phi apply
and no module hooks would be skipped: :func:`fused_cell_kernels`.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Protocol

import torch
import torch.nn.modules.module as _module
from torch import nn
from torch.autograd.function import once_differentiable

from attnas.kernels.attention_gates import GateKernel, gate_kernel
from attnas.kernels.fused_phi import FUSED_MIN_POSITIONS, fused_applies, phi_backward, phi_forward, phi_parameters
from attnas.kernels.layout import cl_to_groups, groups_to_cl, layout_kernel_applies
from attnas.ops import overrides
from attnas.ops.memory_format import is_channels_last

#: Operations that are not gates: ``identity`` adds its source into the node, ``zero`` is absent.
NOT_GATED = ("identity", "zero")


class HOGACell(Protocol):
    """What the fused cell reads of a discrete HOGA cell (:class:`~attnas.ops.hoga_cell.HOGA`).

    Attributes:
        training: Whether the cell is in training mode.
        groups: ``K``, the number of channel groups.
        group_channels: Channels per group.
        choices: Edge key (``"j-k"``) -> its operation's name.
        ops: Edge key -> its operation's module.
        phi: The projection :math:`\\varphi`.
    """

    training: bool
    groups: int
    group_channels: int
    choices: dict[str, str]
    ops: nn.ModuleDict
    phi: nn.Module

    def edges_into(self, k: int) -> list[tuple[int, str, str]]:
        """``(j, key, operation)`` of the present edges into node ``U_k``."""


def _has_hooks(module: nn.Module) -> bool:
    """Whether ``module`` has forward or backward hooks of its own (the fused cell does not call
    the edges' modules, so it would skip them)."""
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks)


def _global_hooks() -> bool:
    """Whether forward or backward hooks are registered for every module."""
    return bool(_module._global_forward_hooks or _module._global_forward_pre_hooks
                or _module._global_backward_hooks or _module._global_backward_pre_hooks)


def fused_cell_kernels(cell: HOGACell, x: torch.Tensor, min_positions: int) -> dict[str, GateKernel] | None:
    """The gated edges' kernels when :func:`fused_cell` can run ``cell`` on ``x``, else ``None``.

    Training mode, ``x`` a CPU float32 / float64 ``(B, C, H, W)`` tensor, NCHW-contiguous or
    channels-last (then the layout kernel is needed), a plane of at least ``min_positions``
    positions (below it phi runs in PyTorch operations), phi's compiled kernel applicable and
    every gated edge's module able to run its compiled kernel on ``x``
    (:func:`~attnas.kernels.attention_gates.gate_kernel`; building the kernels has no side effect). A cell whose edge modules carry hooks (or with
    global module hooks registered) runs module by module, so that the hooks see every edge.
    """
    if not cell.training or x.dim() != 4 or x.shape[2] * x.shape[3] < min_positions:
        return None
    if _global_hooks() or any(_has_hooks(op) for op in cell.ops.values()):
        return None
    if not (x.is_contiguous() or (is_channels_last(x) and layout_kernel_applies(x))):
        return None
    if not fused_applies(cell.phi, [x]):  # x stands for the nodes: same batch, plane, dtype and device
        return None
    kernels = {}
    for key, choice in cell.choices.items():
        if choice in NOT_GATED:
            continue
        kernel = gate_kernel(cell.ops[key], x)
        if kernel is None:
            return None
        kernels[key] = kernel
    return kernels


class _FusedCell(torch.autograd.Function):
    @staticmethod
    def forward(ctx, cell, kernels, x, *params):  # noqa: D102 (autograd protocol)
        K, c = cell.groups, cell.group_channels
        B, _, H, W = x.shape
        channels_last = is_channels_last(x)
        inputs = cl_to_groups(x, c) if channels_last else [x[:, k * c:(k + 1) * c] for k in range(K)]
        nodes: list[torch.Tensor] = []
        saved: list[torch.Tensor] = []  # what each gate kernel keeps, in the order of kernels
        counts: list[int] = []
        for k in range(K):
            edges = [(key, choice, inputs[k] if j == k else nodes[j]) for j, key, choice in cell.edges_into(k)]
            identities = [src for _, choice, src in edges if choice == "identity"]
            u = None
            for key, choice, src in edges:
                if choice == "identity":
                    continue
                if u is None:  # the first gate writes the node
                    u = x.new_empty(B, c, H, W)
                    kept = kernels[key].forward(src, u)
                else:  # the others add into it
                    kept = kernels[key].forward(src, u, u)
                counts.append(len(kept))
                saved.extend(kept)
            if u is None and identities:  # the node is the sum of its identity edges' sources
                u = identities.pop(0)
                if identities:
                    u = u + identities.pop(0)
            for src in identities:
                u.add_(src)
            nodes.append(x.new_zeros(B, c, H, W) if u is None else u)
        out, phi_saved, ctx.phi_dims = phi_forward(cell.phi, params[len(params) - 8:], nodes, channels_last)
        ctx.save_for_backward(*saved, *phi_saved)
        ctx.cell, ctx.kernels, ctx.counts, ctx.shape, ctx.channels_last = cell, kernels, counts, x.shape, channels_last
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):  # noqa: D102 (autograd protocol)
        cell, kernels = ctx.cell, ctx.kernels
        saved = ctx.saved_tensors
        ends = list(accumulate(ctx.counts))
        spans = {key: (end - n, end) for key, end, n in zip(kernels, ends, ctx.counts)}
        phi_saved = saved[ends[-1] if ends else 0:]
        phi_grads, dnodes = phi_backward(phi_saved, ctx.phi_dims, dout)
        want_dx = ctx.needs_input_grad[2]
        dinputs: list[torch.Tensor | None] = [None] * cell.groups
        grads: dict[str, tuple] = {}
        for k in reversed(range(cell.groups)):
            dy = dnodes[k]  # complete: every node after k has added its edges' gradients into it
            for j, key, choice in cell.edges_into(k):
                if choice == "identity":
                    if j < k:
                        dnodes[j].add_(dy)
                    else:
                        dinputs[k] = dy
                    continue
                if j < k:  # added into the source node's gradient
                    target = addend = dnodes[j]
                else:
                    target, addend = (torch.empty_like(dy) if want_dx else None), None
                    dinputs[k] = target
                a, b = spans[key]
                grads[key] = kernels[key].backward(saved[a:b], dy, target, addend)
        dx = None
        if want_dx:
            if all(d is None for d in dinputs):
                fmt = torch.channels_last if ctx.channels_last else torch.contiguous_format
                dx = torch.zeros(ctx.shape, dtype=dout.dtype).contiguous(memory_format=fmt)
            elif ctx.channels_last:
                dx = groups_to_cl(dinputs, ctx.shape)
            else:
                dx = torch.cat([dout.new_zeros(dnodes[0].shape) if d is None else d for d in dinputs], 1)
        param_grads = [g for key in kernels for g in grads[key]]
        return (None, None, dx, *param_grads, *phi_grads)


def fused_cell(cell: HOGACell, x: torch.Tensor, kernels: dict[str, GateKernel]) -> torch.Tensor:
    """``cell(x)`` as one autograd operation, with the gated edges' ``kernels`` from
    :func:`fused_cell_kernels`.

    The result is channels-last when ``x`` is, else NCHW-contiguous.
    """
    params = [p for kernel in kernels.values() for p in kernel.params]
    return _FusedCell.apply(cell, kernels, x, *params, *phi_parameters(cell.phi))


def hoga_cell(cell: HOGACell, x: torch.Tensor) -> torch.Tensor:
    """Override of :meth:`attnas.ops.hoga_cell.HOGA.forward` (hook ``hoga_cell``)."""
    kernels = fused_cell_kernels(cell, x, FUSED_MIN_POSITIONS)
    return NotImplemented if kernels is None else fused_cell(cell, x, kernels)


overrides.register("hoga_cell", "hoga_cell", hoga_cell)
