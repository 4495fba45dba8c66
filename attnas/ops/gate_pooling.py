"""Average and max pooling for AutoLA's attention gates, with cheaper backward passes.

The channel attention v2 (AutoLA Eq. 5), the spatial attention (Eq. 6) and CBAM (Eq. 8)
pool their input by a maximum (over positions or over channels). ``torch.amax`` is fast
forward, but its backward builds an equality mask, converts it to floats, counts it, divides
and multiplies (measured 6.4 ms for a 4 MB input on this CPU, for a 0.1 ms forward);
``torch.max`` with indices has a cheap backward but a forward 40x slower than ``amax`` when
the reduced dimension is not the innermost one.

:func:`amax` keeps ``torch.amax``'s forward and its gradient exactly (the gradient of a
maximum shared by ``n`` tied entries is split ``1/n`` each), computing it as one equality
mask and one ``where`` when the maximum is unique, which it is unless entries tie exactly.

:func:`mean` is ``x.sum(dims) / n`` written as a sum times ``1 / n``: the backward of a mean
materialises the expanded gradient divided by ``n`` (one more pass over the input), the
sum's is an expanded view that the gradient accumulation reads directly. The values agree
with ``torch.mean`` up to float rounding.
"""

from __future__ import annotations

import torch


class _AMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dims: tuple[int, ...]):
        values = x.amax(dims, keepdim=True)
        ctx.save_for_backward(x, values)
        ctx.dims = dims
        return values.squeeze(dims) if len(dims) else values

    @staticmethod
    def backward(ctx, grad):
        x, values = ctx.saved_tensors
        dims = ctx.dims
        grad = grad.reshape(values.shape)
        mask = x == values
        if int(torch.count_nonzero(mask)) == values.numel():  # every maximum unique (no conversion of the mask)
            return torch.where(mask, grad, grad.new_zeros(())), None
        count = mask.sum(dims, keepdim=True)
        return mask * (grad / count), None  # ties: split as torch.amax does


def amax(x: torch.Tensor, dims: int | tuple[int, ...]) -> torch.Tensor:
    """``x.amax(dims)`` (no kept dimensions), with the same gradient and a cheaper backward.

    Args:
        x: Input.
        dims: Dimension(s) to reduce.

    Returns:
        The maxima, ``x``'s shape without ``dims``.
    """
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    dims = tuple(sorted(d % x.dim() for d in dims))
    if torch.compiler.is_compiling() or not x.requires_grad:
        return x.amax(dims)
    return _AMax.apply(x, dims)


def mean(x: torch.Tensor, dims: int | tuple[int, ...]) -> torch.Tensor:
    """``x.mean(dims)`` as ``x.sum(dims) * (1 / n)`` (cheaper backward; equal up to rounding).

    Args:
        x: Input.
        dims: Dimension(s) to average over.

    Returns:
        The means, ``x``'s shape without ``dims``.
    """
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    n = 1
    for d in dims:
        n *= x.shape[d]
    return x.sum(dims) * (1.0 / n)
