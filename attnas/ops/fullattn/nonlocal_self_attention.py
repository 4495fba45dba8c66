"""Non-local self-attention (embedded Gaussian).

The non-local operation of Wang et al., *Non-local Neural Networks* (CVPR 2018, Eqs. 1-3,
"embedded Gaussian" pairwise function), the global operation of the full-attention NAS
search space (Zhou et al., 2021, Sec. III.A, Table II ``Non-local SA``):

.. math::
    y_i = \\sum_{j} \\frac{\\exp(\\theta(x_i)^\\top \\phi(x_j))}
        {\\sum_{j'} \\exp(\\theta(x_i)^\\top \\phi(x_{j'}))} \\, g(x_j)

over all positions ``j`` of the feature map, with :math:`\\theta, \\phi, g` bias-free 1x1
projections. As in Wang et al. the logits are not scaled. The output projection
:math:`W_z` and the residual connection of Wang et al.'s non-local *block* are provided
by the surrounding building block of Fig. 1(c) (the 1x1 expansion and the shortcut), so
this module is the attention operation alone. It is computed with
:func:`torch.nn.functional.scaled_dot_product_attention`, which never materialises the
``HW x HW`` attention matrix on back-ends with a fused kernel.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from attnas.core.errors import DataError

__all__ = ["NonLocalSelfAttention", "nonlocal_attention"]


def nonlocal_attention(theta: Tensor, phi: Tensor, g: Tensor) -> Tensor:
    """Single-head softmax attention over all positions (Wang et al. 2018, Eq. 1-3).

    Args:
        theta: Queries ``[B, C, H, W]``.
        phi: Keys ``[B, C, H, W]``.
        g: Values ``[B, C_v, H, W]``.

    Returns:
        ``[B, C_v, H, W]``.

    Shapes:
        - **input:** ``theta, phi`` ``[B, C, H, W]``, ``g`` ``[B, C_v, H, W]``
        - **output:** ``[B, C_v, H, W]``
    """
    if theta.dim() != 4 or phi.shape != theta.shape or g.shape[0] != theta.shape[0] or g.shape[2:] != theta.shape[2:]:
        raise DataError(
            f"non-local attention: theta and phi must be [B, C, H, W] and g [B, C_v, H, W]; got "
            f"{tuple(theta.shape)}, {tuple(phi.shape)}, {tuple(g.shape)}"
        )
    B, C, H, W = theta.shape
    q = theta.flatten(2).transpose(1, 2).unsqueeze(1)  # [B, 1, HW, C]
    k = phi.flatten(2).transpose(1, 2).unsqueeze(1)
    v = g.flatten(2).transpose(1, 2).unsqueeze(1)
    out = F.scaled_dot_product_attention(q, k, v, scale=1.0)  # [B, 1, HW, C_v]
    return out.squeeze(1).transpose(1, 2).reshape(B, g.shape[1], H, W)


class NonLocalSelfAttention(nn.Module):
    """Non-local self-attention operation (Wang et al. 2018; Zhou et al., 2021, Table II).

    Args:
        in_channels: Input channels.
        out_channels: Width of :math:`\\theta, \\phi, g` and of the output.

    Shapes:
        - **input:** ``[B, in_channels, H, W]``
        - **output:** ``[B, out_channels, H, W]``
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.qkv = nn.Conv2d(in_channels, 3 * out_channels, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise DataError(f"NonLocalSelfAttention expects [B, {self.in_channels}, H, W], got {tuple(x.shape)}")
        theta, phi, g = self.qkv(x).chunk(3, dim=1)
        return nonlocal_attention(theta, phi, g)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
