r"""Local multi-head self-attention with relative position embeddings.

The "stand-alone self-attention" layer of Ramachandran et al., *Stand-Alone Self-Attention
in Vision Models* (NeurIPS 2019, Eq. 3), the local operation of the full-attention NAS
search space (Zhou et al., 2021, Sec. III.A, Table II: ``Local SA_k{3,5,7}_h{4,8}``):

.. math::
    y_{ij} = \sum_{(a,b) \in \mathcal{N}_k(i,j)}
        \operatorname{softmax}_{ab}\left(q_{ij}^\top k_{ab} + q_{ij}^\top r_{a-i,b-j}\right) v_{ab}

with :math:`q = W_Q x`, :math:`k = W_K x`, :math:`v = W_V x` (1x1 projections) and
:math:`\mathcal{N}_k(i,j)` the :math:`k \times k` neighbourhood centred on :math:`(i,j)`.
As in SASA, the logits are not scaled by :math:`1/\sqrt{d}`.

Heads:
    The ``C`` channels of ``q``, ``k``, ``v`` (and of the relative embedding ``r``) are
    split depthwise into ``heads`` groups of ``C / heads`` channels; each group attends
    separately and the outputs are concatenated (SASA, Sec. 2.2).

Relative position embeddings:
    :math:`r_{a-i,b-j} \in \mathbb{R}^C` is the concatenation of a row-offset embedding
    (``rel_row[:, a-i]``, the first ``C/2`` channels) and a column-offset embedding
    (``rel_col[:, b-j]``, the last ``C/2`` channels), exactly as SASA describes ("each with
    dimension 1/2 d_out"). Because heads split the channels depthwise, with an even number
    of heads the first half of the heads sees row offsets and the second half column
    offsets (the layout of the widely used reference implementation).

Borders (padding):
    Neighbours that fall outside the image are **masked**: they are left out of the
    softmax, so a query near the border attends over the in-image part of its window and
    its weights still sum to one. (Zero-padding implementations instead let padded
    positions, whose key and value are zero, take the weight :math:`e^{q^\top r}`.)

Stride:
    With ``stride = s`` the queries are the pixels ``(s*i, s*j)`` (like a convolution with
    padding ``(k-1)/2``), giving an output of size ``ceil(H/s) x ceil(W/s)``; keys and
    values come from the full-resolution map. The paper's blocks use stride 1 followed by
    average pooling (Sec. III.A); the strided form is provided for standalone use.

Implementation:
    :func:`local_attention` is the eager definition: it gathers every window with
    ``unfold`` (``k*k`` copies of the keys and values). Faster implementations of the same
    result live in the optional package :mod:`attnas.kernels` and replace it through two
    hooks: ``local_attention`` (:meth:`LocalSelfAttention.attend`; kernel
    ``local_attention_flat``, pure PyTorch on any device, no unfolded copies) and
    ``local_self_attention`` (:meth:`LocalSelfAttention.forward`; kernel ``local_attention``,
    compiled C++ on the CPU, tried first). Which one runs is the kernel switch's choice
    (``ATTNAS_NO_KERNELS=1``, ``ATTNAS_DISABLE_KERNELS``), never the layer's.
"""

from __future__ import annotations

import math
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.core.errors import ConfigError, DataError
from attnas.ops.overrides import overridable

__all__ = ["LocalSelfAttention", "check_inputs", "local_attention", "relative_embedding_table", "strided_queries",
           "window_geometry"]

# --------------------------------------------------------------------------- definition


def window_geometry(H: int, W: int, ks: int, stride: int) -> tuple[int, int, int]:
    """``(p, Ho, Wo)``: the window's half width ``p = (k-1)/2`` (the padding of a ``k x k``
    window) and the output size ``ceil(H/s) x ceil(W/s)`` of the queries at stride ``s``."""
    return (ks - 1) // 2, -(-H // stride), -(-W // stride)


def check_inputs(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, heads: int, stride: int) -> int:
    """Validate the arguments of :func:`local_attention` (and of the kernels that replace it);
    return the window size ``k``."""
    if k.dim() != 4 or v.shape != k.shape:
        raise DataError(f"local attention: keys and values must both be [B, C, H, W], got {tuple(k.shape)} and {tuple(v.shape)}")
    B, C, H, W = k.shape
    if stride < 1:
        raise ConfigError(f"local attention: stride must be >= 1, got {stride}")
    _, Ho, Wo = window_geometry(H, W, 1, stride)
    if tuple(q.shape) not in ((B, C, H, W), (B, C, Ho, Wo)):
        raise DataError(
            f"local attention: queries must be [B, C, H, W] = {(B, C, H, W)} or already strided "
            f"{(B, C, Ho, Wo)}, got {tuple(q.shape)}"
        )
    if heads < 1 or C % heads:
        raise ConfigError(f"local attention: {C} channels cannot be split into {heads} heads")
    if C % 2:
        raise ConfigError(f"local attention: the channel count must be even (row/column halves), got {C}")
    ks = rel_row.shape[-1]
    if rel_row.shape != (C // 2, ks) or rel_col.shape != (C // 2, ks) or ks % 2 == 0:
        raise DataError(
            f"local attention: rel_row and rel_col must be [C/2, k] = [{C // 2}, k] with odd k, "
            f"got {tuple(rel_row.shape)} and {tuple(rel_col.shape)}"
        )
    return ks


def strided_queries(q: Tensor, H: int, W: int, stride: int) -> Tensor:
    """The queries at the strided positions (accepts full-resolution or pre-strided ``q``)."""
    if stride > 1 and q.shape[-2:] == (H, W):
        return q[:, :, ::stride, ::stride]
    return q


def relative_embedding_table(rel_row: Tensor, rel_col: Tensor) -> Tensor:
    """The relative embedding :math:`r_{a,b}` for every offset of the window.

    Args:
        rel_row: Row-offset embeddings ``[C/2, k]`` (column ``a`` is offset ``a - (k-1)/2``).
        rel_col: Column-offset embeddings ``[C/2, k]``.

    Returns:
        ``[C, k, k]``: channel ``c < C/2`` holds ``rel_row[c, a]``, channel ``c >= C/2``
        holds ``rel_col[c - C/2, b]``, at offset index ``(a, b)``.
    """
    half, ks = rel_row.shape
    return torch.cat(
        [rel_row[:, :, None].expand(half, ks, ks), rel_col[:, None, :].expand(half, ks, ks)], dim=0
    )


# --------------------------------------------------------------------------- eager


def local_attention(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                              heads: int, stride: int = 1) -> Tensor:
    r"""Local multi-head self-attention (SASA Eq. 3), by its definition.

    .. math::
        y_{ij} = \sum_{(a,b) \in \mathcal{N}_k(i,j)}
            \operatorname{softmax}_{ab}\left(q_{ij}^\top (k_{ab} + r_{a-i,b-j})\right) v_{ab}

    Gathers the ``k x k`` window of every key and value with ``unfold`` (``k*k`` copies of
    ``k`` and ``v``), adds the relative embedding to the keys, masks the neighbours outside
    the image (``-inf`` logits) and takes the softmax over each window.

    Args:
        q: Queries ``[B, C, H, W]`` (or already strided ``[B, C, ceil(H/s), ceil(W/s)]``).
        k: Keys ``[B, C, H, W]``.
        v: Values ``[B, C, H, W]``.
        rel_row: Row-offset embeddings ``[C/2, ks]`` (``ks`` odd: the window size).
        rel_col: Column-offset embeddings ``[C/2, ks]``.
        heads: Number of heads; ``C`` must be divisible by it.
        stride: Query stride ``s``.

    Returns:
        ``[B, C, ceil(H/s), ceil(W/s)]``.

    Shapes:
        - **input:** ``q, k, v`` ``[B, C, H, W]``, ``rel_row, rel_col`` ``[C/2, ks]``
        - **output:** ``[B, C, ceil(H/s), ceil(W/s)]``
    """
    ks = check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    B, C, H, W = k.shape
    p, Ho, Wo = window_geometry(H, W, ks, stride)
    d = C // heads
    K2 = ks * ks
    q = strided_queries(q, H, W, stride)
    keys = F.unfold(k, ks, padding=p, stride=stride).view(B, heads, d, K2, Ho * Wo)
    values = F.unfold(v, ks, padding=p, stride=stride).view(B, heads, d, K2, Ho * Wo)
    inside = F.unfold(k.new_ones(1, 1, H, W), ks, padding=p, stride=stride).view(1, 1, K2, Ho * Wo) > 0
    r = relative_embedding_table(rel_row, rel_col).reshape(1, heads, d, K2, 1)
    logits = (q.reshape(B, heads, d, 1, Ho * Wo) * (keys + r)).sum(2)  # [B, heads, K2, L]
    attn = logits.masked_fill(~inside, float("-inf")).softmax(dim=2)
    out = (attn.unsqueeze(2) * values).sum(3)
    return out.reshape(B, C, Ho, Wo)


# --------------------------------------------------------------------------- module


class LocalSelfAttention(nn.Module):
    """Local multi-head self-attention layer (SASA Eq. 3; Zhou et al., 2021, Table II ``Local SA``).

    Projects the input with bias-free 1x1 convolutions to queries, keys and values of
    ``out_channels`` channels and attends over each pixel's ``kernel_size x
    kernel_size`` neighbourhood with ``heads`` heads and learned relative position
    embeddings (row and column offsets, half of the channels each): :func:`local_attention`.

    Args:
        in_channels: Input channels.
        out_channels: Attention width ``C`` (even, divisible by ``heads``).
        kernel_size: Spatial extent ``k`` (odd; the paper uses 3, 5, 7).
        heads: Number of heads (the paper uses 4 and 8).
        stride: Query stride (the paper's blocks use 1 and pool afterwards).
        save_attention: For ``local_attention_flat``: keep the attention weights for the
            backward pass instead of recomputing them (memory against speed).

    Shapes:
        - **input:** ``[B, in_channels, H, W]``
        - **output:** ``[B, out_channels, ceil(H/stride), ceil(W/stride)]``
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, heads: int = 8,
                 stride: int = 1, save_attention: bool = True):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"LocalSelfAttention: kernel_size must be odd and positive, got {kernel_size}")
        if heads < 1 or out_channels % heads or out_channels % 2:
            raise ConfigError(
                f"LocalSelfAttention: out_channels={out_channels} must be even and divisible by heads={heads}"
            )
        if stride < 1:
            raise ConfigError(f"LocalSelfAttention: stride must be >= 1, got {stride}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.heads, self.stride = kernel_size, heads, stride
        self.save_attention = save_attention
        self.qkv = nn.Conv2d(in_channels, 3 * out_channels, 1, bias=False)
        self.rel_row = nn.Parameter(torch.empty(out_channels // 2, kernel_size))
        self.rel_col = nn.Parameter(torch.empty(out_channels // 2, kernel_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Default 1x1-convolution init; relative embeddings ~ N(0, 1/d_head)."""
        self.qkv.reset_parameters()
        std = 1.0 / math.sqrt(self.out_channels // self.heads)
        nn.init.normal_(self.rel_row, std=std)
        nn.init.normal_(self.rel_col, std=std)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries (at the strided positions), keys and values: ``W_Q x``, ``W_K x``, ``W_V x``."""
        C, w = self.out_channels, self.qkv.weight
        if self.stride > 1:
            q = F.conv2d(x[:, :, :: self.stride, :: self.stride], w[:C])
            k, v = F.conv2d(x, w[C:]).chunk(2, dim=1)
            return q, k, v
        q, k, v = F.conv2d(x, w).chunk(3, dim=1)
        return q, k, v

    @overridable("local_attention")
    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """:func:`local_attention` of the projections with this layer's embeddings and heads."""
        return local_attention(q, k, v, self.rel_row, self.rel_col, self.heads, self.stride)

    @overridable("local_self_attention")
    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise DataError(f"LocalSelfAttention expects [B, {self.in_channels}, H, W], got {tuple(x.shape)}")
        return self.attend(*self.project(x))

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, heads={self.heads}, "
                f"stride={self.stride}")
