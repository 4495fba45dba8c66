r"""Kernel ``fused_phi``: the projection :math:`\varphi` of the HOGA cell (AutoLA Eq. 3) as one operation.

:class:`~attnas.ops.autola.hoga_cell.HOGAProjection` computes, from the nodes ``U_0 ... U_{K-1}``
(``c`` channels each),

.. math::
    y_1 = W_1 [U_0; \dots; U_{K-1}; \textstyle\sum_k U_k], \quad
    z = \mathrm{BN}_2\big(W_2 \, \mathrm{relu}(\mathrm{BN}_1(y_1))\big), \quad
    \varphi = z \otimes \mathcal{S}\big(f_c(z^c_{avg})\big)

(``1 x 1`` convolutions ``W_1, W_2``, batch norms with batch statistics, channel attention of
Eq. 4 with the two-layer MLP ``f_c``). :func:`fused_projection` runs all of it, forward and
backward, in ``csrc/fused_phi.cpp``: one autograd node
instead of some fifteen. It applies in training mode (batch statistics) on CPU float32 /
float64 tensors; :func:`fused_applies` says when. The batch norms' running statistics are
updated as ``nn.BatchNorm2d`` updates them (momentum, or the cumulative average when the
momentum is ``None``; unbiased variance).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence

import torch
from torch import nn

from attnas.kernels._build import KERNEL_DTYPES, Library, int64_array, pointer_table
from attnas.kernels._running_stats import count_batch
from attnas.kernels._planes import planes_contiguous
from attnas.ops import overrides
from attnas.ops.autola.hoga_cell import HOGAProjection

_DIMS = [ctypes.c_int64, ctypes.c_int64] + [ctypes.c_int] * 6
_p, _f = ctypes.c_void_p, ctypes.c_double
LIBRARY = Library("fused_phi", {
    "attnas_phi_forward": [ctypes.c_int, *[_p] * 10, _f, _f, *[_p] * 8, _f, _f, *_DIMS],
    "attnas_phi_backward": [ctypes.c_int, *[_p] * 26, *_DIMS],
})

#: Smallest plane (``H W``) on which the kernel runs phi: on 2 x 2 planes (the last stage of a
#: ResNet on 8 x 8 digits) PyTorch's operations were faster (1.3 against 1.6 ms forward +
#: backward at batch 64, 64 channels); from 4 x 4 on the kernel is.
FUSED_MIN_POSITIONS = 16


def _dims(node: torch.Tensor, k: int, channels: int, hidden: int, channels_last: bool) -> list[int]:
    B, c, H, W = node.shape
    return [B, H * W, k, c, channels, hidden, int(channels_last)]


def _call(name: str, *args) -> None:
    LIBRARY.call(f"attnas_phi_{name}", *args, torch.get_num_threads())


_SCRATCH = threading.local()


def _scratch(like: torch.Tensor) -> torch.Tensor:
    """A scratch tensor shaped like ``like``, reused across calls (per thread, grown as needed).

    The backward's ``dr`` lives only between its second and third pass; a fresh full-size
    tensor each call costs the page faults of first touching it (4 MiB per call at AutoLA's
    first ResNet stage).
    """
    buf = getattr(_SCRATCH, "buffer", None)
    if buf is None or buf.dtype != like.dtype or buf.numel() < like.numel():
        buf = _SCRATCH.buffer = torch.empty(like.numel(), dtype=like.dtype)
    return buf[: like.numel()].view(like.shape)


#: Where phi's kernel finds its eight tensors: (submodule path, parameter name), in its order.
_PHI_PARAMETERS = ((("conv1",), "weight"), (("bn1",), "weight"), (("bn1",), "bias"), (("conv2",), "weight"),
                   (("bn2",), "weight"), (("bn2",), "bias"), (("attn", "fc1"), "weight"), (("attn", "fc2"), "weight"))


def _parameter(module: nn.Module, path: tuple[str, ...], name: str) -> torch.Tensor:
    for part in path:
        module = module._modules[part]
    p = module._parameters.get(name)
    return p if p is not None else getattr(module, name)


def phi_parameters(phi: nn.Module) -> tuple[torch.Tensor, ...]:
    """The eight tensors phi's kernel takes, in its order (the ``1 x 1`` convolutions' weights
    ``(C_out, C_in, 1, 1)`` as they are: the kernel reads them as ``C_out x C_in`` matrices, the
    same memory, and their gradients come back in their shape without a view in the graph).

    Read from the modules' parameter dictionaries, not through ``nn.Module.__getattr__`` (a
    fixed cost on every call).
    """
    return tuple(_parameter(phi, path, name) for path, name in _PHI_PARAMETERS)


def phi_forward(phi: nn.Module, params: Sequence[torch.Tensor], nodes: Sequence[torch.Tensor],
                channels_last: bool) -> tuple[torch.Tensor, list[torch.Tensor], list[int]]:
    """The kernel's forward (and the batch norms' running-statistics updates), outside autograd.

    Args:
        phi: The :class:`~attnas.ops.autola.hoga_cell.HOGAProjection` (its batch norms' settings).
        params: :func:`phi_parameters` of ``phi``.
        nodes: ``U_0 ... U_{K-1}``, each ``(B, c, H, W)`` with contiguous planes.
        channels_last: Write the result channels-last.

    Returns:
        The projection, the tensors :func:`phi_backward` needs, and the rest it needs (the
        kernel's dimensions, the nodes' batch strides).
    """
    params = [t.contiguous() for t in params]
    nodes = [n if planes_contiguous(n) else n.contiguous() for n in nodes]
    B, _, H, W = nodes[0].shape
    C, hid = params[3].shape[0], params[6].shape[0]
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = nodes[0]
    out = torch.empty(B, C, H, W, dtype=x.dtype, memory_format=fmt)
    y1, y2, stats = x.new_empty(B, C, H, W), x.new_empty(B, C, H, W), x.new_empty(6, C)
    avg, h, gate = x.new_empty(B, C), x.new_empty(B, hid), x.new_empty(B, C)
    dims = _dims(x, len(nodes), C, hid, channels_last)
    strides = int64_array([n.stride(0) for n in nodes])
    (rm1, rv1, f1), (rm2, rv2, f2) = _running(phi.bn1), _running(phi.bn2)
    _call("forward", KERNEL_DTYPES[x.dtype], pointer_table(nodes), strides, *params, phi.bn1.eps, phi.bn2.eps, out, y1,
          y2, stats, avg, h, gate, pointer_table([rm1, rv1, rm2, rv2]), f1, f2, *dims)
    return out, [*params, y1, y2, stats, avg, h, gate, *nodes], (dims, strides)


def phi_backward(saved: Sequence[torch.Tensor], dims: tuple, dout: torch.Tensor) -> tuple[list[torch.Tensor],
                                                                                         list[torch.Tensor]]:
    """The kernel's backward: the gradients of the eight parameters and of the nodes (fresh
    tensors), from what :func:`phi_forward` returned (``saved``, ``dims``)."""
    w1, g1, be1, w2, g2, be2, fc1, fc2, y1, y2, stats, avg, h, gate, *nodes = saved
    dims, strides = dims
    channels_last = bool(dims[-1])
    dout = dout.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    dr = _scratch(y1)
    dxs = [torch.empty(n.shape, dtype=n.dtype) for n in nodes]
    grads = [torch.empty_like(t) for t in (w1, g1, be1, w2, g2, be2, fc1, fc2)]
    _call("backward", KERNEL_DTYPES[dout.dtype], dout, pointer_table(nodes), strides, w1, g1, be1, w2, g2, fc1, fc2,
          y1, y2, stats, avg, h, gate, dr, pointer_table(dxs), *grads, *dims)
    return grads, dxs


class _FusedProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, phi, channels_last, *tensors):  # noqa: D102 (autograd protocol)
        out, saved, ctx.dims = phi_forward(phi, tensors[:8], tensors[8:], channels_last)
        ctx.save_for_backward(*saved)
        return out

    @staticmethod
    def backward(ctx, dout):  # noqa: D102 (autograd protocol)
        grads, dxs = phi_backward(ctx.saved_tensors, ctx.dims, dout)
        return (None, None, *grads, *dxs)


def _batch_norm_applies(bn: nn.Module) -> bool:
    return isinstance(bn, nn.BatchNorm2d) and bn.training and bn.affine


def fused_applies(phi: nn.Module, nodes: Sequence[torch.Tensor]) -> bool:
    """Whether :func:`fused_projection` can run ``phi`` on ``nodes``.

    ``phi`` must be a :class:`~attnas.ops.autola.hoga_cell.HOGAProjection` in training mode (batch
    norms with affine parameters, channel attention without biases), every tensor on the CPU
    in one float32 / float64 dtype (the running statistics too, contiguous: the kernel updates
    them in place), with more than one value per channel, and the kernel on and built.
    """
    if not overrides.active("hoga_phi"):
        return False
    x = nodes[0]
    bn1, bn2, attn = getattr(phi, "bn1", None), getattr(phi, "bn2", None), getattr(phi, "attn", None)
    if not (_batch_norm_applies(bn1) and _batch_norm_applies(bn2) and getattr(attn, "fc1", None) is not None
            and attn.fc1.bias is None and attn.fc2.bias is None
            and isinstance(getattr(phi, "conv1", None), nn.Conv2d) and isinstance(getattr(phi, "conv2", None), nn.Conv2d)):
        return False
    # the tensors the kernel reads (named one by one: walking the module tree took a third of this check)
    running = [t for bn in (bn1, bn2) for t in (bn.running_mean, bn.running_var) if t is not None]
    tensors = [*nodes, *phi_parameters(phi), *running]
    dtype = x.dtype
    return (x.is_cpu and dtype in KERNEL_DTYPES and x.dim() == 4
            and all(t.is_cpu and t.dtype == dtype for t in tensors)
            and all(b.is_contiguous() for b in running)
            and all(n.shape == x.shape for n in nodes) and x.shape[0] * x.shape[2] * x.shape[3] > 1
            and LIBRARY.load() is not None)


def _running(bn: nn.BatchNorm2d) -> tuple[torch.Tensor | None, torch.Tensor | None, float]:
    """The running mean and variance the kernel moves towards the batch's (``None`` when ``bn``
    keeps none) and the batch's weight, counting the batch as ``nn.BatchNorm2d`` does in training."""
    if not bn.track_running_stats or bn.running_mean is None:
        return None, None, 0.0
    return bn.running_mean, bn.running_var, count_batch(bn)


def fused_projection(phi: nn.Module, nodes: Sequence[torch.Tensor], channels_last: bool = False) -> torch.Tensor:
    r"""``phi.project(nodes)`` in the compiled kernel (check :func:`fused_applies` first).

    Args:
        phi: A :class:`~attnas.ops.autola.hoga_cell.HOGAProjection` in training mode.
        nodes: ``U_0 ... U_{K-1}``, each ``(B, c, H, W)``.
        channels_last: Return the result in channels-last memory format (else NCHW).

    Returns:
        :math:`\varphi([U_0; \dots; U_{K-1}; \bar U])`, ``(B, C, H, W)``.
    """
    return _FusedProjection.apply(phi, channels_last, *phi_parameters(phi), *nodes)


def project(phi: HOGAProjection, nodes: Sequence[torch.Tensor], channels_last: bool = False) -> torch.Tensor:
    """Override of :meth:`attnas.ops.autola.hoga_cell.HOGAProjection._folded` (hook ``hoga_phi``):
    in training on CPU float planes of at least :data:`FUSED_MIN_POSITIONS` positions."""
    if fused_applies(phi, nodes) and nodes[0].shape[2] * nodes[0].shape[3] >= FUSED_MIN_POSITIONS:
        return fused_projection(phi, nodes, channels_last)
    return NotImplemented


overrides.register("hoga_phi", "fused_phi", project)
