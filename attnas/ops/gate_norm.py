r"""``sigmoid(BN(z))``, the end of the relaxed HOGA cell's spatial gates, as one operation.

The spatial attention and CBAM (AutoLA Eqs. 6, 8) map the pooled input to one channel per
edge, then take :math:`\mathcal{S}(\mathrm{BN}(z))`. :func:`batch_norm_sigmoid` computes

.. math::
    s = \mathcal{S}\Big(\gamma \frac{z - \mu_B}{\sqrt{\sigma_B^2 + \epsilon}} + \beta\Big)

with the batch statistics :math:`\mu_B, \sigma_B^2` of each channel (training mode), and
updates the running statistics as ``F.batch_norm`` does (``momentum``, unbiased variance). On
CPU float32 / float64 tensors forward and backward run in the compiled kernel of
:mod:`attnas.ops._gate_norm_kernel` (PyTorch's CPU batch norm parallelises over channels, and
these maps have one to four); elsewhere, in evaluation, and without a compiler, in
``F.batch_norm`` and ``torch.sigmoid``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.ops import _gate_norm_kernel
from attnas.ops._compiled import KERNEL_DTYPES
from attnas.ops.running_stats import update_running


def _call(name: str, *args) -> None:
    _gate_norm_kernel.LIBRARY.call(f"attnas_gate_norm_{name}", *args, torch.get_num_threads())


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
            and z.shape[0] * z[0, 0].numel() > 1 and _gate_norm_kernel.load() is not None)


def batch_norm_sigmoid(z: torch.Tensor, running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                       weight: torch.Tensor, bias: torch.Tensor, training: bool, momentum: float,
                       eps: float) -> torch.Tensor:
    """``torch.sigmoid(F.batch_norm(z, running_mean, running_var, weight, bias, training, momentum, eps))``.

    Args:
        z: ``(B, G, H, W)`` (or any ``(B, G, ...)``).
        running_mean, running_var: ``(G,)`` running statistics, updated in place in training;
            or ``None``.
        weight, bias: ``(G,)`` affine parameters (``None``: no affine map, by ``F.batch_norm``).
        training: Normalise with the batch's statistics (and update the running ones).
        momentum: Weight of the batch's statistics in the running averages.
        eps: Added to the variance.

    Returns:
        The gate, shaped like ``z``.
    """
    if not training or not kernel_applies(z, weight, bias):
        return torch.sigmoid(F.batch_norm(z, running_mean, running_var, weight, bias, training, momentum, eps))
    stats = z.new_empty(3, z.shape[1])
    s = _BatchNormSigmoid.apply(z, weight, bias, eps, stats)
    if running_mean is not None and running_var is not None:
        update_running(running_mean, running_var, stats[0], stats[1], z.numel() // z.shape[1], momentum)
    return s
