"""Kernel ``window_max``: AutoAttend's ``max pool 3`` (:func:`attnas.ops.autoattend.text.window_max3`)
with a fused backward pass. Pure PyTorch.

Overrides the hook ``window_max3`` while gradients are recorded for its input; the result and
the gradient are autograd's bit for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.ops import overrides


def _window_max3(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``y_t = max(h_{t-1}, h_t, h_{t+1})`` along dim 1 (borders: the lowest finite value).

    The max of the three shifted views in the ``[B, L, H]`` layout (contiguous output, no
    transposes). Returns ``y``, the padded input and the first pairwise maximum.
    """
    hp = F.pad(h, (0, 0, 1, 1), value=torch.finfo(h.dtype).min)
    m1 = torch.maximum(hp[:, :-2], hp[:, 1:-1])
    return torch.maximum(m1, hp[:, 2:]), hp, m1


def _max_weights(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Gradient share of ``x`` in ``maximum(x, y)``: 1 where ``x > y``, 1/2 at ties, 0 below."""
    return torch.sub(x, y).sign_().add_(1.0).mul_(0.5)


class _WindowMax3(torch.autograd.Function):
    """:func:`_window_max3` with a fused backward pass, bit for bit autograd's.

    Autograd's backward of ``maximum(maximum(a, b), c)`` builds, per ``maximum``, two
    comparisons, a ``where`` and a ``masked_fill`` (slow on CPU) and three full-size
    zero tensors for the shifted views; here each ``maximum`` costs one weight tensor
    (1, 1/2 at ties - as ``torch.maximum``'s own derivative -, 0) and two products, and
    the three shifted gradients are added in autograd's order (``c``, then ``b``, then
    ``a``), so the sums round the same (``tests/kernels/test_window_max.py``).
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor) -> torch.Tensor:
        y, hp, m1 = _window_max3(h)
        ctx.save_for_backward(hp, m1)
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        hp, m1 = ctx.saved_tensors
        a, b, c = hp[:, :-2], hp[:, 1:-1], hp[:, 2:]
        w_m1 = _max_weights(m1, c)
        g_m1 = g * w_m1
        g_c = g * w_m1.neg_().add_(1.0)  # 1 - w: the share of c
        w_a = _max_weights(a, b)
        g_a = g_m1 * w_a
        g_b = g_m1.mul_(w_a.neg_().add_(1.0))
        # grad h_j = (g_c[j - 1] + g_b[j]) + g_a[j + 1]
        g_b[:, 1:].add_(g_c[:, :-1])
        g_b[:, :-1].add_(g_a[:, 1:])
        return g_b


def window_max3(h: torch.Tensor) -> torch.Tensor:
    """Override of :func:`attnas.ops.autoattend.text.window_max3` (only where a gradient is recorded)."""
    if not (h.requires_grad and torch.is_grad_enabled()):
        return NotImplemented
    return _WindowMax3.apply(h)


overrides.register("window_max3", "window_max", window_max3)
