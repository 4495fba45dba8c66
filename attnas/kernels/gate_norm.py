r"""Kernel ``gate_norm``: ``sigmoid(BN(z))`` of the relaxed HOGA cell's spatial gates in one operation.

The spatial attention and CBAM gates (AutoLA Eqs. 6, 8) end in a batch norm of a map with one
channel per edge, then a sigmoid. PyTorch's CPU batch norm parallelises over channels, and these
maps have one to four. ``csrc/gate_norm.cpp`` computes the training-mode batch norm and the
sigmoid in one pass each way, parallel over the ``B G`` planes, per-plane sums reduced in image
order (results do not depend on the thread count). Overrides
:func:`attnas.ops.gate_norm.batch_norm_sigmoid` in training on CPU float32 / float64 tensors.
"""

from __future__ import annotations

import ctypes

import torch

from attnas.kernels._build import KERNEL_DTYPES, Library
from attnas.kernels._running_stats import update_running
from attnas.ops import overrides

_p, _i64 = ctypes.c_void_p, ctypes.c_int64
LIBRARY = Library("gate_norm", {
    "attnas_gate_norm_forward": [ctypes.c_int, _p, _p, _p, ctypes.c_double, _p, _p, _i64, _i64, _i64, ctypes.c_int],
    "attnas_gate_norm_backward": [ctypes.c_int, *[_p] * 8, _i64, _i64, _i64, ctypes.c_int],
})


def _call(name: str, *args) -> None:
    LIBRARY.call(f"attnas_gate_norm_{name}", *args, torch.get_num_threads())


class _BatchNormSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, gamma, beta, eps, stats):  # noqa: D102 (autograd protocol)
        B, G = z.shape[:2]
        P = z[0, 0].numel()
        z = z.contiguous()
        gamma, beta = gamma.contiguous(), beta.contiguous()
        s = torch.empty_like(z)
        _call("forward", KERNEL_DTYPES[z.dtype], z, gamma, beta, eps, s, stats, B, G, P)
        ctx.save_for_backward(z, s, gamma, stats)
        return s

    @staticmethod
    def backward(ctx, ds):  # noqa: D102 (autograd protocol)
        z, s, gamma, stats = ctx.saved_tensors
        B, G = z.shape[:2]
        dz, dgamma, dbeta = torch.empty_like(z), torch.empty_like(gamma), torch.empty_like(gamma)
        _call("backward", KERNEL_DTYPES[z.dtype], ds.contiguous(), z, s, gamma, stats, dz, dgamma, dbeta, B, G,
              z[0, 0].numel())
        return dz, dgamma, dbeta, None, None


def kernel_applies(z: torch.Tensor, *params: torch.Tensor) -> bool:
    """Whether the compiled kernel runs for ``z`` ``(B, G, ...)`` and the affine ``params``:
    CPU tensors of one float32 / float64 dtype, more than one value per channel, kernel built."""
    return (z.device.type == "cpu" and z.dtype in KERNEL_DTYPES and z.dim() >= 3
            and all(p is not None and p.device.type == "cpu" and p.dtype == z.dtype for p in params)
            and z.shape[0] * z[0, 0].numel() > 1 and LIBRARY.load() is not None)


def batch_norm_sigmoid(z: torch.Tensor, running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                       weight: torch.Tensor, bias: torch.Tensor, training: bool, momentum: float,
                       eps: float) -> torch.Tensor:
    """Override of :func:`attnas.ops.gate_norm.batch_norm_sigmoid` (training mode only)."""
    if not training or not kernel_applies(z, weight, bias):
        return NotImplemented
    stats = z.new_empty(3, z.shape[1])
    s = _BatchNormSigmoid.apply(z, weight, bias, eps, stats)
    if running_mean is not None and running_var is not None:
        update_running(running_mean, running_var, stats[0], stats[1], z.numel() // z.shape[1], momentum)
    return s


overrides.register("batch_norm_sigmoid", "gate_norm", batch_norm_sigmoid)
