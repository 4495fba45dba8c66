"""Local multi-head self-attention with relative position embeddings.

The "stand-alone self-attention" layer of Ramachandran et al., *Stand-Alone Self-Attention
in Vision Models* (NeurIPS 2019, Eq. 3), the local operation of the full-attention NAS
search space (Zhou et al., paper 003, Sec. III.A, Table II: ``Local SA_k{3,5,7}_h{4,8}``):

.. math::
    y_{ij} = \\sum_{(a,b) \\in \\mathcal{N}_k(i,j)}
        \\operatorname{softmax}_{ab}\\left(q_{ij}^\\top k_{ab} + q_{ij}^\\top r_{a-i,b-j}\\right) v_{ab}

with :math:`q = W_Q x`, :math:`k = W_K x`, :math:`v = W_V x` (1x1 projections) and
:math:`\\mathcal{N}_k(i,j)` the :math:`k \\times k` neighbourhood centred on :math:`(i,j)`.
As in SASA, the logits are not scaled by :math:`1/\\sqrt{d}`.

Heads:
    The ``C`` channels of ``q``, ``k``, ``v`` (and of the relative embedding ``r``) are
    split depthwise into ``heads`` groups of ``C / heads`` channels; each group attends
    separately and the outputs are concatenated (SASA, Sec. 2.2).

Relative position embeddings:
    :math:`r_{a-i,b-j} \\in \\mathbb{R}^C` is the concatenation of a row-offset embedding
    (``rel_row[:, a-i]``, the first ``C/2`` channels) and a column-offset embedding
    (``rel_col[:, b-j]``, the last ``C/2`` channels), exactly as SASA describes ("each with
    dimension 1/2 d_out"). Because heads split the channels depthwise, with an even number
    of heads the first half of the heads sees row offsets and the second half column
    offsets (the layout of the widely used reference implementation).

Borders (padding):
    Neighbours that fall outside the image are **masked**: they are left out of the
    softmax, so a query near the border attends over the in-image part of its window and
    its weights still sum to one. (Zero-padding implementations instead let padded
    positions, whose key and value are zero, take the weight :math:`e^{q^\\top r}`.) Both
    implementations below follow this rule and agree to float precision.

Stride:
    With ``stride = s`` the queries are the pixels ``(s*i, s*j)`` (like a convolution with
    padding ``(k-1)/2``), giving an output of size ``ceil(H/s) x ceil(W/s)``; keys and
    values come from the full-resolution map. The paper's blocks use stride 1 followed by
    average pooling (Sec. III.A); the strided form is provided for standalone use.

Implementations:
    :func:`local_attention_reference` gathers every window with ``unfold``, materialising
    ``k*k`` copies of the keys and values; it is the straightforward definition.
    :func:`local_attention` computes the same result without ever materialising an
    unfolded copy of the keys or values: windows are strided *views* of a flattened,
    padded map (see :func:`_flat_geometry`) and every product with them is an in-place
    multiply-add (one per head channel for the logits, one per window offset for the
    weighted sums); the relative term and the border mask are separable into row and
    column parts; the softmax uses ``exp2``; the backward pass is written by hand and
    scatters key/value gradients through the same strided views. The batch is processed
    in cache-sized chunks. The attention weights are kept for the backward pass by
    default (``save_attention=False`` recomputes them chunk by chunk instead).
    :func:`local_attention_fused` runs the same flat layout through a compiled CPU kernel
    (:mod:`attnas.ops._local_attention_kernel`, built with the system C++ compiler on first
    use) that keeps a tile of 16 queries' logits, softmax and weighted sums in cache and
    fuses the backward pass likewise; it falls back to :func:`local_attention` when it
    cannot run (no compiler, not on the CPU, not float32/float64).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.errors import ConfigError, DataError
from attnas.ops._compiled import KERNEL_DTYPES

__all__ = [
    "LocalSelfAttention",
    "local_attention",
    "local_attention_fused",
    "local_attention_reference",
    "relative_embedding_table",
]

IMPLEMENTATIONS = ("fast", "unfold", "fused")

#: ``LocalSelfAttention(impl="fast")`` uses the unfold formulation below this many unfolded
#: elements (``B*C*k*k*H_out*W_out``): on tiny maps its few large kernels beat the
#: per-offset loop (measured crossover on CPU: 1.5e5-2e5). Both give the same result.
UNFOLD_BELOW = 1 << 17


# --------------------------------------------------------------------------- checks


def _check_inputs(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, heads: int, stride: int) -> int:
    """Validate shapes; return the window size ``k``."""
    if k.dim() != 4 or v.shape != k.shape:
        raise DataError(f"local attention: keys and values must both be [B, C, H, W], got {tuple(k.shape)} and {tuple(v.shape)}")
    B, C, H, W = k.shape
    if stride < 1:
        raise ConfigError(f"local attention: stride must be >= 1, got {stride}")
    Ho, Wo = -(-H // stride), -(-W // stride)
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


def _strided_queries(q: Tensor, H: int, W: int, stride: int) -> Tensor:
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


# --------------------------------------------------------------------------- reference


def local_attention_reference(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                              heads: int, stride: int = 1) -> Tensor:
    """Local multi-head self-attention by ``unfold`` (SASA Eq. 3; the reference definition).

    Materialises the ``k x k`` window of every key and value (``k*k`` copies of ``k`` and
    ``v``) and masks neighbours outside the image.

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
    ks = _check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    B, C, H, W = k.shape
    p = (ks - 1) // 2
    Ho, Wo = -(-H // stride), -(-W // stride)
    d = C // heads
    K2 = ks * ks
    q = _strided_queries(q, H, W, stride)
    keys = F.unfold(k, ks, padding=p, stride=stride).view(B, heads, d, K2, Ho * Wo)
    values = F.unfold(v, ks, padding=p, stride=stride).view(B, heads, d, K2, Ho * Wo)
    inside = F.unfold(k.new_ones(1, 1, H, W), ks, padding=p, stride=stride).view(1, 1, K2, Ho * Wo) > 0
    r = relative_embedding_table(rel_row, rel_col).reshape(1, heads, d, K2, 1)
    logits = (q.reshape(B, heads, d, 1, Ho * Wo) * (keys + r)).sum(2)  # [B, heads, K2, L]
    attn = logits.masked_fill(~inside, float("-inf")).softmax(dim=2)
    out = (attn.unsqueeze(2) * values).sum(3)
    return out.reshape(B, C, Ho, Wo)


# --------------------------------------------------------------------------- fast


@functools.lru_cache(maxsize=256)
def _flat_geometry(H: int, W: int, ks: int, stride: int) -> tuple[int, int, int, int, int, int, int]:
    """Sizes of the flattened layout used by :func:`local_attention`.

    The keys and values are zero-padded to ``Hp x Wp`` (``Wp = W + 2p``) and flattened, so
    that the neighbour ``(a, b)`` of the query at flat position ``n`` is the flat element
    ``a*Wp + b + s*n``: every window offset is then a strided *view* whose inner dimension
    is a long contiguous run. Query row ``i`` occupies flat positions ``i*Wp .. i*Wp+Wo-1``;
    the other ``Wp - Wo`` positions of each row are padding queries (zero, discarded).

    Returns:
        ``(p, Ho, Wo, Wp, Hp, N, T0)``: padding, output size, padded width and height,
        number of flat query positions ``N = Ho*Wp`` and the largest window offset
        ``T0 = (ks-1)*(Wp+1)``.
    """
    p = (ks - 1) // 2
    Ho, Wo = -(-H // stride), -(-W // stride)
    Wp = W + 2 * p
    N = Ho * Wp
    T0 = (ks - 1) * Wp + (ks - 1)
    need = T0 + stride * (N - 1) + 1
    Hp = max(H + 2 * p, -(-need // Wp))
    return p, Ho, Wo, Wp, Hp, N, T0


_MASKS: dict = {}


def _flat_mask(H: int, W: int, ks: int, stride: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Additive border mask ``[2*ks, N]``: rows ``0..ks-1`` for row offsets, ``ks..2ks-1`` for columns.

    Entry ``(a, n)`` is 0 when the neighbour at row offset ``a`` of flat query ``n`` is
    inside the image and ``-inf`` otherwise (likewise for columns); a neighbour ``(a, b)``
    is outside exactly when ``mask[a] + mask[ks + b]`` is ``-inf``, so the mask is added to
    the (equally separable) relative-position terms before they are broadcast to
    ``ks x ks``. Padding queries (flat columns ``>= Wo``) get zero column terms so their
    (discarded) softmax stays finite.
    """
    key = (H, W, ks, stride, dtype, str(device))
    mask = _MASKS.get(key)
    if mask is None:
        p, Ho, Wo, Wp, Hp, N, T0 = _flat_geometry(H, W, ks, stride)
        off = torch.arange(ks, device=device).view(ks, 1, 1) - p
        rows = torch.arange(Ho, device=device).view(1, Ho, 1) * stride + off
        cols = torch.arange(Wp, device=device).view(1, 1, Wp) * stride + off
        row_ok = ((rows >= 0) & (rows < H)).expand(ks, Ho, Wp)
        col_ok = ((cols >= 0) & (cols < W)) | (torch.arange(Wp, device=device) >= Wo)
        inside = torch.cat([row_ok, col_ok.expand(ks, Ho, Wp)]).reshape(2 * ks, N)
        mask = torch.zeros(2 * ks, N, dtype=dtype, device=device).masked_fill_(~inside, float("-inf"))
        if len(_MASKS) > 256:
            _MASKS.clear()
        _MASKS[key] = mask
    return mask


def _windows(flat: Tensor, ks: int, Wp: int, stride: int, N: int) -> Tensor:
    """``[n, C, ks, ks, N]`` view of a flat padded map ``[n, C, L]`` (no copy)."""
    sn, sc, sl = flat.stride()
    return flat.as_strided((flat.shape[0], flat.shape[1], ks, ks, N), (sn, sc, Wp * sl, sl, stride * sl),
                           flat.storage_offset())


def _offsets(windows: Tensor) -> list[Tensor]:
    """The ``ks*ks`` offset views ``[..., N]`` of a ``[..., ks, ks, N]`` window view, row-major."""
    return [w for row in windows.unbind(-3) for w in row.unbind(-2)]


def _relative_matrix(rel_row: Tensor, rel_col: Tensor, heads: int) -> Tensor:
    """``[heads, 2k, d]``: row ``a`` gives the row-offset term, row ``k + b`` the column term."""
    half, ks = rel_row.shape
    C = 2 * half
    zeros = rel_row.new_zeros(half, ks)
    R = torch.cat([torch.cat([rel_row, zeros], 1), torch.cat([zeros, rel_col], 1)], 0)  # [C, 2k]
    return R.view(heads, C // heads, 2 * ks).transpose(1, 2)


_LOG2E = 1.4426950408889634


def _attention(qf: Tensor, kf: Tensor, R: Tensor, mask: Tensor, heads: int, ks: int, stride: int, N: int,
               Wp: int, out: Tensor, q_buffer: Tensor, rel_buffer: Tensor) -> Tensor:
    """Attention weights ``[n, heads, ks*ks, N]`` of one batch chunk: ``softmax(q.k + q.r + mask)``.

    The logits are built in base 2 (queries pre-scaled by ``log2(e)``) so the softmax can
    use ``exp2``, which is several times faster than ``exp`` on CPU; the weights are the
    same, ``2**(x*log2 e) = e**x``. ``out``, ``q_buffer`` and ``rel_buffer`` are reusable
    buffers of at least ``n`` images (writing into memory that is already mapped avoids
    page faults on every chunk).
    """
    n, C, _ = qf.shape
    d = C // heads
    q = torch.mul(qf.view(n, heads, d, N), _LOG2E, out=q_buffer[:n])
    rel = torch.matmul(R, q, out=rel_buffer[:n])  # [n, heads, 2k, N]: row- and column-offset terms
    rel += mask
    logits = torch.add(rel[:, :, :ks, None], rel[:, :, None, ks:], out=out[:n].view(n, heads, ks, ks, N))
    keys = _windows(kf, ks, Wp, stride, N).unflatten(1, (heads, d))  # [n, heads, d, k, k, N] view
    for c in range(d):
        logits.addcmul_(q[:, :, c, None, None], keys[:, :, c])
    logits = logits.view(n, heads, ks * ks, N)
    logits -= logits.amax(dim=2, keepdim=True)
    torch.exp2(logits, out=logits)
    logits *= logits.sum(dim=2, keepdim=True).reciprocal_()
    return logits


def _chunk_size(B: int, C: int, N: int, budget: int = 1 << 20) -> int:
    """Images per chunk: one ``[n, C, N]`` operand of the per-offset products should take
    about ``budget`` bytes per thread (each thread's share stays in cache, while every
    kernel launch still has enough work). Measured on CPU, one thread, C=32 on 32x32 maps:
    6 images per chunk beat 16 and 32 by 1.3-1.8x for k=3 and k=7."""
    return max(1, min(B, round(budget * torch.get_num_threads() / (4 * C * N))))


class _LocalAttentionFunction(torch.autograd.Function):
    """Local attention on the flat layout with a hand-written backward.

    The backward uses the attention weights kept by the forward pass, or recomputes them
    chunk by chunk when ``save_attention`` is false.

    Every product with a window of keys or values is an in-place multiply-add on a
    strided view (``addcmul_``), one per channel of a head (logits) or per window offset
    (weighted sums and their transposes), so no ``k*k``-sized copy of ``k`` or ``v`` and
    no ``[C, k*k]``-sized product is ever formed.
    """

    @staticmethod
    def forward(ctx, qf: Tensor, kf: Tensor, vf: Tensor, R: Tensor, mask: Tensor,
                heads: int, ks: int, stride: int, N: int, Wp: int, chunk: int, save_attention: bool) -> Tensor:
        B, C, _ = qf.shape
        d = C // heads
        out = qf.new_zeros(B, heads, d, N)
        n0 = min(B, chunk)
        saved = qf.new_empty(B, heads, ks * ks, N) if save_attention else None
        buffers = [qf.new_empty(n0, heads, ks * ks, N) if saved is None else saved,
                   qf.new_empty(n0, heads, d, N), qf.new_empty(n0, heads, 2 * ks, N)]
        for i in range(0, B, chunk):
            j = min(B, i + chunk)
            if saved is not None:
                buffers[0] = saved[i:j]
            attn = _attention(qf[i:j], kf[i:j], R, mask, heads, ks, stride, N, Wp, *buffers)
            values = _windows(vf[i:j], ks, Wp, stride, N).unflatten(1, (heads, d))
            o = out[i:j]
            for v_o, a_o in zip(_offsets(values), attn.unsqueeze(2).unbind(3)):
                o.addcmul_(v_o, a_o)
        ctx.save_for_backward(qf, kf, vf, R, mask, saved)
        ctx.config = (heads, ks, stride, N, Wp, chunk)
        return out.view(B, C, N)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        qf, kf, vf, R, mask, saved = ctx.saved_tensors
        heads, ks, stride, N, Wp, chunk = ctx.config
        B, C, length = kf.shape
        d = C // heads
        grad_out = grad_out.contiguous().view(B, heads, d, N)
        dq = qf.new_empty(B, heads, d, N)
        dk, dv = torch.zeros_like(kf), torch.zeros_like(vf)
        dR = torch.zeros_like(R)
        n0 = min(B, chunk)
        buffers = () if saved is not None else (
            qf.new_empty(n0, heads, ks * ks, N), qf.new_empty(n0, heads, d, N), qf.new_empty(n0, heads, 2 * ks, N))
        grad_buffer = qf.new_empty(n0, heads, ks, ks, N)
        d_rel_buffer = qf.new_empty(n0, heads, 2 * ks, N)
        for i in range(0, B, chunk):
            j = min(B, i + chunk)
            n = j - i
            q, g = qf[i:j].view(n, heads, d, N), grad_out[i:j]
            if saved is not None:
                attn = saved[i:j]
            else:
                attn = _attention(qf[i:j], kf[i:j], R, mask, heads, ks, stride, N, Wp, *buffers)
            values = _windows(vf[i:j], ks, Wp, stride, N).unflatten(1, (heads, d))
            keys = _windows(kf[i:j], ks, Wp, stride, N).unflatten(1, (heads, d))
            d_attn = torch.mul(g[:, :, 0, None, None], values[:, :, 0], out=grad_buffer[:n])
            for c in range(1, d):
                d_attn.addcmul_(g[:, :, c, None, None], values[:, :, c])
            d_logits = d_attn.view_as(attn).mul_(attn)  # softmax backward: A*dA - A*sum(A*dA)
            d_logits.addcmul_(attn, d_logits.sum(dim=2, keepdim=True), value=-1.0)
            # transposed windows: every query sends its share back to each neighbour
            dvw = _windows(dv[i:j], ks, Wp, stride, N).unflatten(1, (heads, d))
            dkw = _windows(dk[i:j], ks, Wp, stride, N).unflatten(1, (heads, d))
            dl = d_logits.view(n, heads, ks, ks, N)
            dqi = dq[i:j]
            d_rel = d_rel_buffer[:n]  # [n, heads, 2k, N]: row-offset and column-offset terms
            torch.sum(dl, 3, out=d_rel[:, :, :ks])
            torch.sum(dl, 2, out=d_rel[:, :, ks:])
            torch.matmul(R.transpose(1, 2), d_rel, out=dqi)
            for dv_o, dk_o, k_o, a_o, dl_o in zip(_offsets(dvw), _offsets(dkw), _offsets(keys),
                                                  attn.unsqueeze(2).unbind(3), d_logits.unsqueeze(2).unbind(3)):
                dv_o.addcmul_(g, a_o)
                dk_o.addcmul_(q, dl_o)
                dqi.addcmul_(k_o, dl_o)
            dR += torch.matmul(d_rel, q.transpose(2, 3)).sum(0)
        return dq.view(B, C, N), dk, dv, dR, None, None, None, None, None, None, None, None


@functools.lru_cache(maxsize=256)
def _fused_geometry(H: int, W: int, ks: int, stride: int, tile: int) -> tuple[int, int, int, int, int, int, int]:
    """Sizes of the flat layout of the fused kernel: :func:`_flat_geometry` with the flat
    query count padded to a multiple of ``tile`` (the kernel's query tile).

    Returns:
        ``(p, Ho, Wo, Wp, Hp, Hq, Npad)``: padding, output size, padded width, padded key
        height, query rows ``Hq`` (``Nq = Hq*Wp`` flat queries are stored, ``Nq >= Npad``)
        and ``Npad``, the flat queries the kernel computes.
    """
    p = (ks - 1) // 2
    Ho, Wo = -(-H // stride), -(-W // stride)
    Wp = W + 2 * p
    Npad = -(-(Ho * Wp) // tile) * tile
    Hq = -(-Npad // Wp)
    need = (ks - 1) * (Wp + 1) + stride * (Npad - 1) + 1
    Hp = max(H + 2 * p, -(-need // Wp))
    return p, Ho, Wo, Wp, Hp, Hq, Npad


def _fused_mask(H: int, W: int, ks: int, stride: int, tile: int, dtype: torch.dtype) -> Tensor:
    """Additive border mask ``[2*ks, Hq*Wp]`` of the fused layout (rows: row offsets, then
    column offsets; see :func:`_flat_mask`). Padding queries (row ``>= Ho`` or column
    ``>= Wo``) get all-zero terms so their (discarded) softmax stays finite."""
    key = ("fused", H, W, ks, stride, tile, dtype)
    mask = _MASKS.get(key)
    if mask is None:
        p, Ho, Wo, Wp, Hp, Hq, Npad = _fused_geometry(H, W, ks, stride, tile)
        off = torch.arange(ks).view(ks, 1, 1) - p
        rows = torch.arange(Hq).view(1, Hq, 1) * stride + off
        cols = torch.arange(Wp).view(1, 1, Wp) * stride + off
        query = (torch.arange(Hq).view(1, Hq, 1) < Ho) & (torch.arange(Wp).view(1, 1, Wp) < Wo)
        row_ok = (rows >= 0) & (rows < H) | ~query
        col_ok = (cols >= 0) & (cols < W) | ~query
        inside = torch.cat([row_ok.expand(ks, Hq, Wp), col_ok.expand(ks, Hq, Wp)]).reshape(2 * ks, Hq * Wp)
        mask = torch.zeros(2 * ks, Hq * Wp, dtype=dtype).masked_fill_(~inside, float("-inf"))
        if len(_MASKS) > 256:
            _MASKS.clear()
        _MASKS[key] = mask
    return mask


_KERNEL_MAX_WINDOW = 15  # KMAX of the kernel source
_warned: set = set()


def _warn_fallback(q: Tensor) -> None:
    """Warn once when the kernel is missing on the CPU (a build problem, not a choice)."""
    from attnas.ops import _local_attention_kernel

    reason = _local_attention_kernel.unavailable_reason()
    if q.device.type == "cpu" and reason is not None and reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"local attention: fused CPU kernel unavailable ({reason}); using the eager path",
                      RuntimeWarning, stacklevel=3)


class _FusedLocalAttentionFunction(torch.autograd.Function):
    """Local attention by the compiled kernel of :mod:`attnas.ops._local_attention_kernel`
    (forward and backward fused per tile of queries; the flat layout of the eager path).

    ``qkv`` is one contiguous ``[B, 3, C, Lx]`` buffer holding the flat, zero-padded maps
    of queries, keys and values (``Lx`` elements per channel); query ``n`` is element
    ``q_offset + n`` of a query row and its window offset ``(a, b)`` is key element
    ``a*Wp + b + stride*n``. One buffer lets :class:`LocalSelfAttention` pad its q/k/v
    projection once and receive one gradient (no per-tensor pads, slices or ``cat``).
    """

    @staticmethod
    def forward(ctx, qkv: Tensor, R: Tensor, mask: Tensor, heads: int, ks: int, stride: int, Wp: int, Npad: int,
                Nq: int, q_offset: int, lib: object, save_attention: bool) -> Tensor:
        B, _, C, Lx = qkv.shape
        out = qkv.new_empty(B, C, Nq)
        attn = qkv.new_empty(B, heads, ks * ks, Nq) if save_attention else None
        base, size = qkv.data_ptr(), qkv.element_size()
        status = lib.attnas_local_attention_forward(
            KERNEL_DTYPES[qkv.dtype], base + q_offset * size, base + C * Lx * size, base + 2 * C * Lx * size,
            R.data_ptr(), mask.data_ptr(), out.data_ptr(), None if attn is None else attn.data_ptr(), B, heads,
            C // heads, Nq, Npad, ks, stride, Wp, 3 * C * Lx, Lx, 3 * C * Lx, Lx, torch.get_num_threads())
        if status:
            raise RuntimeError(f"local attention kernel refused its arguments (status {status})")
        ctx.save_for_backward(qkv, R, mask, attn)
        ctx.config = (heads, ks, stride, Wp, Npad, Nq, q_offset, lib)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: Tensor):
        qkv, R, mask, attn = ctx.saved_tensors
        heads, ks, stride, Wp, Npad, Nq, q_offset, lib = ctx.config
        B, _, C, Lx = qkv.shape
        grad_out = grad_out.contiguous()
        d_qkv = torch.empty_like(qkv)
        d_qkv[:, 0].zero_()  # the kernel writes dq at q_offset..q_offset+Nq and zeroes dk, dv itself
        dR = qkv.new_empty(B, heads, 2 * ks, C // heads)
        base, size = d_qkv.data_ptr(), d_qkv.element_size()
        qkv_base = qkv.data_ptr()
        status = lib.attnas_local_attention_backward(
            KERNEL_DTYPES[qkv.dtype], qkv_base + q_offset * size, qkv_base + C * Lx * size,
            qkv_base + 2 * C * Lx * size, R.data_ptr(), mask.data_ptr(), None if attn is None else attn.data_ptr(),
            grad_out.data_ptr(), base + q_offset * size, base + C * Lx * size, base + 2 * C * Lx * size,
            dR.data_ptr(), B, heads, C // heads, Nq, Npad, ks, stride, Wp, 3 * C * Lx, Lx, 3 * C * Lx, Lx,
            torch.get_num_threads())
        if status:
            raise RuntimeError(f"local attention kernel refused its arguments (status {status})")
        return d_qkv, dR.sum(0), None, None, None, None, None, None, None, None, None, None


def fused_kernel_available(*tensors: Tensor) -> bool:
    """Whether :func:`local_attention_fused` can run on these tensors (CPU, float32 or
    float64, the kernel built); see :func:`attnas.ops._local_attention_kernel.load`."""
    if any(t.device.type != "cpu" or t.dtype not in KERNEL_DTYPES or t.dtype != tensors[0].dtype for t in tensors):
        return False
    from attnas.ops import _local_attention_kernel

    return _local_attention_kernel.load() is not None


def local_attention_fused(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                          heads: int, stride: int = 1, save_attention: bool = False) -> Tensor:
    """Local multi-head self-attention by the fused CPU kernel (SASA Eq. 3; fused version).

    Same result as :func:`local_attention_reference` (float32: to ~1e-6, the kernel's
    ``exp`` is a polynomial; float64: to ~1e-13). Falls back to the eager
    :func:`local_attention` when the kernel cannot run (not on the CPU, another dtype, no
    C++ compiler: see :func:`fused_kernel_available`).

    Args:
        q: Queries ``[B, C, H, W]`` (or already strided ``[B, C, ceil(H/s), ceil(W/s)]``).
        k: Keys ``[B, C, H, W]``.
        v: Values ``[B, C, H, W]``.
        rel_row: Row-offset embeddings ``[C/2, ks]``.
        rel_col: Column-offset embeddings ``[C/2, ks]``.
        heads: Number of heads; ``C`` must be divisible by it.
        stride: Query stride ``s``.
        save_attention: Keep the attention weights for the backward pass instead of
            recomputing them there (default: recompute; inside the kernel that is cheaper
            than writing and re-reading ``B*heads*ks*ks`` floats per position).

    Returns:
        ``[B, C, ceil(H/s), ceil(W/s)]``.

    Shapes:
        - **input:** ``q, k, v`` ``[B, C, H, W]``, ``rel_row, rel_col`` ``[C/2, ks]``
        - **output:** ``[B, C, ceil(H/s), ceil(W/s)]``
    """
    ks = _check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    if ks > _KERNEL_MAX_WINDOW or not fused_kernel_available(q, k, v, rel_row, rel_col):
        _warn_fallback(q)
        return local_attention(q, k, v, rel_row, rel_col, heads, stride)
    B, C, H, W = k.shape
    q = _strided_queries(q, H, W, stride)
    geometry = _fused_layout(H, W, ks, stride)
    p, Ho, Wo, Wp, Hp, Hq, Npad, Lx, q_offset = geometry
    if stride == 1:  # queries in the keys' padded layout (their padding positions are zero)
        qkv = torch.stack([q, k, v], 1)
        qkv = F.pad(qkv, (p, Wp - W - p, p, Lx // Wp - H - p)).reshape(B, 3, C, Lx)
    else:
        qkv = k.new_zeros(B, 3, C, Lx)
        qkv[:, 0, :, : Hq * Wp].view(B, C, Hq, Wp)[:, :, :Ho, :Wo] = q
        qkv[:, 1:].view(B, 2, C, Lx // Wp, Wp)[..., p : p + H, p : p + W] = torch.stack([k, v], 1)
    return _fused_apply(qkv, rel_row, rel_col, heads, H, W, ks, stride, geometry, save_attention)


def _fused_layout(H: int, W: int, ks: int, stride: int) -> tuple[int, ...]:
    """:func:`_fused_geometry` plus the packed buffer's row length ``Lx`` (a whole number
    of padded rows of width ``Wp``) and the offset of query 0 in a query row.

    With stride 1 the queries share the keys' padded layout: query ``n`` is element
    ``n + p*Wp + p`` (its own pixel), so one padded projection serves q, k and v.
    """
    from attnas.ops._local_attention_kernel import TILE

    p, Ho, Wo, Wp, Hp, Hq, Npad = _fused_geometry(H, W, ks, stride, TILE)
    q_offset = p * Wp + p if stride == 1 else 0
    length = max(Hp * Wp, q_offset + Hq * Wp)
    Lx = -(-length // Wp) * Wp
    return p, Ho, Wo, Wp, Hp, Hq, Npad, Lx, q_offset


def _fused_apply(qkv: Tensor, rel_row: Tensor, rel_col: Tensor, heads: int, H: int, W: int, ks: int, stride: int,
                 geometry: tuple[int, ...], save_attention: bool) -> Tensor:
    """Run the kernel on a packed ``[B, 3, C, Lx]`` buffer; returns ``[B, C, Ho, Wo]``."""
    from attnas.ops._local_attention_kernel import TILE, load

    p, Ho, Wo, Wp, Hp, Hq, Npad, Lx, q_offset = geometry
    B, _, C, _ = qkv.shape
    mask = _fused_mask(H, W, ks, stride, TILE, qkv.dtype)
    R = _relative_matrix(rel_row, rel_col, heads).contiguous()
    save = save_attention and torch.is_grad_enabled() and (qkv.requires_grad or R.requires_grad)
    qkv = qkv.contiguous()  # the kernel indexes raw memory (a no-op for the buffers built above)
    out = _FusedLocalAttentionFunction.apply(qkv, R, mask, heads, ks, stride, Wp, Npad, Hq * Wp, q_offset, load(),
                                             save)
    return out.view(B, C, Hq, Wp)[:, :, :Ho, :Wo]


def local_attention(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                    heads: int, stride: int = 1, chunk_size: int | None = None,
                    save_attention: bool = True) -> Tensor:
    """Local multi-head self-attention without unfolded copies (SASA Eq. 3; fast version).

    Same result as :func:`local_attention_reference` (see the module docstring for the
    layout). Works on any device; on CPU it processes the batch in chunks whose working
    set stays in cache.

    Args:
        q: Queries ``[B, C, H, W]`` (or already strided ``[B, C, ceil(H/s), ceil(W/s)]``).
        k: Keys ``[B, C, H, W]``.
        v: Values ``[B, C, H, W]``.
        rel_row: Row-offset embeddings ``[C/2, ks]``.
        rel_col: Column-offset embeddings ``[C/2, ks]``.
        heads: Number of heads; ``C`` must be divisible by it.
        stride: Query stride ``s``.
        chunk_size: Images per chunk (default: :func:`_chunk_size`).
        save_attention: Keep the attention weights (``B*heads*ks*ks`` floats per output
            position) for the backward pass instead of recomputing them chunk by chunk:
            about 30% faster forward+backward, at that memory cost. Ignored without grad.

    Returns:
        ``[B, C, ceil(H/s), ceil(W/s)]``.

    Shapes:
        - **input:** ``q, k, v`` ``[B, C, H, W]``, ``rel_row, rel_col`` ``[C/2, ks]``
        - **output:** ``[B, C, ceil(H/s), ceil(W/s)]``
    """
    ks = _check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    B, C, H, W = k.shape
    p, Ho, Wo, Wp, Hp, N, T0 = _flat_geometry(H, W, ks, stride)
    q = _strided_queries(q, H, W, stride)
    qf = F.pad(q, (0, Wp - Wo)).reshape(B, C, N)
    pad = (p, Wp - W - p, p, Hp - H - p)
    kf = F.pad(k, pad).reshape(B, C, Hp * Wp)
    vf = F.pad(v, pad).reshape(B, C, Hp * Wp)
    mask = _flat_mask(H, W, ks, stride, q.dtype, q.device)
    R = _relative_matrix(rel_row, rel_col, heads)
    chunk = chunk_size or _chunk_size(B, C, N)
    save = save_attention and torch.is_grad_enabled()
    out = _LocalAttentionFunction.apply(qf, kf, vf, R, mask, heads, ks, stride, N, Wp, chunk, save)
    return out.view(B, C, Ho, Wp)[..., :Wo]


# --------------------------------------------------------------------------- module


class LocalSelfAttention(nn.Module):
    """Local multi-head self-attention layer (SASA Eq. 3; paper 003 Table II ``Local SA``).

    Projects the input with bias-free 1x1 convolutions to queries, keys and values of
    ``out_channels`` channels and attends over each pixel's ``kernel_size x
    kernel_size`` neighbourhood with ``heads`` heads and learned relative position
    embeddings (row and column offsets, half of the channels each).

    Args:
        in_channels: Input channels.
        out_channels: Attention width ``C`` (even, divisible by ``heads``).
        kernel_size: Spatial extent ``k`` (odd; the paper uses 3, 5, 7).
        heads: Number of heads (the paper uses 4 and 8).
        stride: Query stride (the paper's blocks use 1 and pool afterwards).
        impl: ``"fast"`` (:func:`local_attention`, or the unfold formulation for maps
            so small that it is quicker, see :data:`UNFOLD_BELOW`), ``"unfold"``
            (:func:`local_attention_reference` always) or ``"fused"``
            (:func:`local_attention_fused`: the compiled CPU kernel, built on first use;
            the ``"fast"`` path where it cannot run). All give the same result.
        save_attention: See :func:`local_attention` (memory against speed; ``"fast"`` only,
            the fused kernel recomputes the weights in its backward pass).

    Shapes:
        - **input:** ``[B, in_channels, H, W]``
        - **output:** ``[B, out_channels, ceil(H/stride), ceil(W/stride)]``
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, heads: int = 8,
                 stride: int = 1, impl: Literal["fast", "unfold", "fused"] = "fast", save_attention: bool = True):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"LocalSelfAttention: kernel_size must be odd and positive, got {kernel_size}")
        if heads < 1 or out_channels % heads or out_channels % 2:
            raise ConfigError(
                f"LocalSelfAttention: out_channels={out_channels} must be even and divisible by heads={heads}"
            )
        if stride < 1:
            raise ConfigError(f"LocalSelfAttention: stride must be >= 1, got {stride}")
        if impl not in IMPLEMENTATIONS:
            raise ConfigError(f"LocalSelfAttention: unknown impl '{impl}'; valid: {', '.join(IMPLEMENTATIONS)}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.heads, self.stride, self.impl = kernel_size, heads, stride, impl
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

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise DataError(f"LocalSelfAttention expects [B, {self.in_channels}, H, W], got {tuple(x.shape)}")
        C = self.out_channels
        w = self.qkv.weight
        if self.impl == "fused" and self.stride == 1 and self.kernel_size <= _KERNEL_MAX_WINDOW \
                and fused_kernel_available(x, w, self.rel_row, self.rel_col):
            # pad the input instead of q, k, v (a bias-free 1x1 projection of zero is zero) and
            # project it straight into the kernel's packed buffer: one pad, one batched GEMM
            # (bmm with the weight broadcast: no layout copies, unlike matmul or a 1x1 conv),
            # one gradient buffer
            B, Cin, H, W = x.shape
            geometry = _fused_layout(H, W, self.kernel_size, 1)
            p, Wp, Lx = geometry[0], geometry[3], geometry[7]
            xf = F.pad(x, (p, Wp - W - p, p, Lx // Wp - H - p)).reshape(B, Cin, Lx)
            qkv = torch.bmm(w.view(1, 3 * C, Cin).expand(B, 3 * C, Cin), xf).view(B, 3, C, Lx)
            return _fused_apply(qkv, self.rel_row, self.rel_col, self.heads, H, W, self.kernel_size, 1, geometry,
                                save_attention=False)
        if self.stride > 1:
            q = F.conv2d(x[:, :, :: self.stride, :: self.stride], w[:C])
            k, v = F.conv2d(x, w[C:]).chunk(2, dim=1)
        else:
            q, k, v = F.conv2d(x, w).chunk(3, dim=1)
        if self.impl == "fused":
            return local_attention_fused(q, k, v, self.rel_row, self.rel_col, self.heads, self.stride)
        small = k.shape[0] * C * self.kernel_size**2 * q.shape[-2] * q.shape[-1] < UNFOLD_BELOW
        if self.impl == "unfold" or small:
            return local_attention_reference(q, k, v, self.rel_row, self.rel_col, self.heads, self.stride)
        return local_attention(q, k, v, self.rel_row, self.rel_col, self.heads, self.stride,
                               save_attention=self.save_attention)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, heads={self.heads}, "
                f"stride={self.stride}, impl={self.impl!r}")
