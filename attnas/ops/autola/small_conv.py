"""Stride-1 "same" convolutions with few channels per group (AutoLA's attention gates).

AutoLA's gates (Ma et al., NeurIPS 2020, Sec. 3.2) convolve maps with very few channels per
group: the normalization attention's depth-wise ``3 x 3`` filter (Eq. 7) and the ``2 -> 1``
filter of the spatial attention and CBAM (Eqs. 6, 8, ``3 x 3`` or ``7 x 7``). Both functions
here are ordinary convolutions with zero padding ``d (k - 1) / 2``:

.. math::
    y_{b,o}(i, j) = \\beta_o + \\sum_{c \\in g(o)} \\sum_{u, v}
        w_{o,c}(u, v) \\, x_{b,c}(i + d (u - r), j + d (v - r)),
    \\qquad r = \\frac{k - 1}{2}

(``g(o)`` the input channels of ``o``'s group).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.ops.overrides import overridable


@overridable("small_conv2d")
def small_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, dilation: int = 1,
                 groups: int = 1) -> torch.Tensor:
    """A stride-1 convolution with zero padding ``dilation * (k - 1) / 2`` (output size = input size).

    Args:
        x: Input ``(B, C_in, H, W)``.
        weight: Filters ``(C_out, C_in / groups, k, k)``, ``k`` odd.
        bias: Optional ``(C_out,)``.
        dilation: Dilation ``d`` of the kernel.
        groups: Number of channel groups.

    Returns:
        ``(B, C_out, H, W)``.
    """
    k = weight.shape[-1]
    if k % 2 == 0 or weight.shape[-2] != k:
        raise ValueError(f"small_conv2d needs a square kernel of odd size, got {tuple(weight.shape[-2:])}")
    return F.conv2d(x, weight, bias, 1, dilation * (k - 1) // 2, dilation, groups)


@overridable("depthwise_pair")
def depthwise_pair(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, d1: int, w2: torch.Tensor,
                   b2: torch.Tensor | None, d2: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two depth-wise "same" convolutions of one input, where the outputs may outnumber the inputs.

    Output channel ``o`` of each bank filters input channel ``o mod C_in``:
    ``small_conv2d(x.repeat(1, G, 1, 1), w, b, d, C_out)`` for each bank ``(w, b, d)``,
    ``G = C_out / C_in``.

    Args:
        x: ``(B, C_in, H, W)``.
        w1: ``(C_out, 1, k, k)`` filters of the first bank (``k`` odd), ``C_out`` a multiple
            of ``C_in``.
        b1: Optional ``(C_out,)`` biases of the first bank.
        d1: Dilation of the first bank.
        w2: Filters of the second bank, shaped like ``w1``.
        b2: Optional ``(C_out,)`` biases of the second bank.
        d2: Dilation of the second bank.

    Returns:
        The two outputs, ``(B, C_out, H, W)`` each.
    """
    Cin, Cout = x.shape[1], w1.shape[0]
    src = x if Cout == Cin else x.repeat(1, Cout // Cin, 1, 1)
    return small_conv2d(src, w1, b1, d1, Cout), small_conv2d(src, w2, b2, d2, Cout)
