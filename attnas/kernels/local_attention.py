"""Kernel ``local_attention``: SASA local self-attention (``Local SA`` of Zhou et al., 2021) compiled for the CPU.

``csrc/local_attention.cpp`` keeps a tile of 16 queries' logits, softmax and weighted sums in
cache and fuses the backward pass likewise, on the flat, zero-padded layout of
:mod:`attnas.kernels.local_attention_flat` (query count padded to a multiple of the tile).

Overrides :meth:`attnas.ops.fullattn.local_self_attention.LocalSelfAttention.forward` (hook
``local_self_attention``) on CPU float32/float64 with windows up to 15:
with stride 1 the layer pads its input instead of q, k, v (a bias-free 1x1 projection of zero
is zero) and projects it straight into the kernel's packed ``[B, 3, C, Lx]`` buffer (one pad,
one batched GEMM, one gradient buffer); with a larger stride it packs the projections. Where
it does not apply, the layer's eager forward runs (and its ``attend`` hook may still take the
flat PyTorch kernel). :func:`local_attention_fused` is the functional form.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.kernels._build import KERNEL_DTYPES, Library
from attnas.kernels.local_attention_flat import _MASKS, _flat_geometry, _padded_height, _relative_matrix
from attnas.ops import overrides
from attnas.ops.fullattn.local_self_attention import check_inputs, strided_queries

#: Query positions per tile (``TILE`` of the C++ source); the flat query count is padded to a multiple of it.
TILE = 16
#: The largest window the kernel takes (``KMAX`` of the C++ source).
MAX_WINDOW = 15

_p, _i64, _i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
LIBRARY = Library("local_attention", {
    "attnas_local_attention_forward": [_i32] + [_p] * 7 + [_i64] * 12 + [_i32],
    "attnas_local_attention_backward": [_i32] + [_p] * 11 + [_i64] * 12 + [_i32],
})


def applies(*tensors: Tensor) -> bool:
    """Whether the kernel can run on these tensors: CPU, one dtype (float32 or float64), the
    library built (a one-line warning says why when it cannot be)."""
    if any(t.device.type != "cpu" or t.dtype not in KERNEL_DTYPES or t.dtype != tensors[0].dtype for t in tensors):
        return False
    return LIBRARY.load() is not None


@functools.lru_cache(maxsize=256)
def _fused_geometry(H: int, W: int, ks: int, stride: int, tile: int) -> tuple[int, int, int, int, int, int, int]:
    """Sizes of the flat layout of the fused kernel: :func:`~attnas.kernels.local_attention_flat._flat_geometry` with the flat
    query count padded to a multiple of ``tile`` (the kernel's query tile).

    Returns:
        ``(p, Ho, Wo, Wp, Hp, Hq, Npad)``: padding, output size, padded width, padded key
        height, query rows ``Hq`` (``Nq = Hq*Wp`` flat queries are stored, ``Nq >= Npad``)
        and ``Npad``, the flat queries the kernel computes.
    """
    p, Ho, Wo, Wp, _, N, T0 = _flat_geometry(H, W, ks, stride)
    Npad = -(-N // tile) * tile
    Hq = -(-Npad // Wp)
    return p, Ho, Wo, Wp, _padded_height(H, p, Wp, T0, stride, Npad), Hq, Npad


def _fused_mask(H: int, W: int, ks: int, stride: int, tile: int, dtype: torch.dtype) -> Tensor:
    """Additive border mask ``[2*ks, Hq*Wp]`` of the fused layout (rows: row offsets, then
    column offsets; see :func:`~attnas.kernels.local_attention_flat._flat_mask`). Padding queries (row ``>= Ho`` or column
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


class _FusedLocalAttentionFunction(torch.autograd.Function):
    """Local attention by ``csrc/local_attention.cpp`` (forward and backward fused per tile
    of queries; the flat layout of :mod:`attnas.kernels.local_attention_flat`).

    ``qkv`` is one contiguous ``[B, 3, C, Lx]`` buffer holding the flat, zero-padded maps
    of queries, keys and values (``Lx`` elements per channel); query ``n`` is element
    ``q_offset + n`` of a query row and its window offset ``(a, b)`` is key element
    ``a*Wp + b + stride*n``. One buffer lets :class:`LocalSelfAttention` pad its q/k/v
    projection once and receive one gradient (no per-tensor pads, slices or ``cat``).
    """

    @staticmethod
    def forward(ctx, qkv: Tensor, R: Tensor, mask: Tensor, heads: int, ks: int, stride: int, Wp: int, Npad: int,
                Nq: int, q_offset: int, lib: Any, save_attention: bool) -> Tensor:
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


def local_attention_fused(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                          heads: int, stride: int = 1, save_attention: bool = False) -> Tensor:
    """Local multi-head self-attention by the fused CPU kernel (SASA Eq. 3; fused version).

    Same result as :func:`attnas.ops.fullattn.local_self_attention.local_attention` (float32: to
    ~1e-6, the kernel's ``exp`` is a polynomial; float64: to ~1e-13). Returns
    ``NotImplemented`` when the kernel cannot run (not on the CPU, another dtype, a window
    over 15, the library not built: see :func:`applies`).

    The arguments ``q, k, v, rel_row, rel_col, heads, stride`` and the shapes are those of
    :func:`~attnas.ops.fullattn.local_self_attention.local_attention`.

    Args:
        save_attention: Keep the attention weights for the backward pass instead of
            recomputing them there (default: recompute; inside the kernel that is cheaper
            than writing and re-reading ``B*heads*ks*ks`` floats per position).

    Returns:
        ``[B, C, ceil(H/s), ceil(W/s)]``.
    """
    ks = check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    if ks > MAX_WINDOW or not applies(q, k, v, rel_row, rel_col):
        return NotImplemented
    B, C, H, W = k.shape
    q = strided_queries(q, H, W, stride)
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
    p, Ho, Wo, Wp, Hp, Hq, Npad = _fused_geometry(H, W, ks, stride, TILE)
    q_offset = p * Wp + p if stride == 1 else 0
    length = max(Hp * Wp, q_offset + Hq * Wp)
    Lx = -(-length // Wp) * Wp
    return p, Ho, Wo, Wp, Hp, Hq, Npad, Lx, q_offset


def _fused_apply(qkv: Tensor, rel_row: Tensor, rel_col: Tensor, heads: int, H: int, W: int, ks: int, stride: int,
                 geometry: tuple[int, ...], save_attention: bool) -> Tensor:
    """Run the kernel on a packed ``[B, 3, C, Lx]`` buffer; returns ``[B, C, Ho, Wo]``."""
    p, Ho, Wo, Wp, Hp, Hq, Npad, Lx, q_offset = geometry
    B, _, C, _ = qkv.shape
    mask = _fused_mask(H, W, ks, stride, TILE, qkv.dtype)
    R = _relative_matrix(rel_row, rel_col, heads).contiguous()
    save = save_attention and torch.is_grad_enabled() and (qkv.requires_grad or R.requires_grad)
    qkv = qkv.contiguous()  # the kernel indexes raw memory (a no-op for the buffers built above)
    out = _FusedLocalAttentionFunction.apply(qkv, R, mask, heads, ks, stride, Wp, Npad, Hq * Wp, q_offset, LIBRARY.load(),
                                             save)
    return out.view(B, C, Hq, Wp)[:, :, :Ho, :Wo]


def local_self_attention(module: nn.Module, x: Tensor) -> Tensor:
    """Override of :meth:`~attnas.ops.fullattn.local_self_attention.LocalSelfAttention.forward`."""
    if module.kernel_size > MAX_WINDOW or x.dim() != 4 or x.shape[1] != module.in_channels:
        return NotImplemented
    w = module.qkv.weight
    if not applies(x, w, module.rel_row, module.rel_col):
        return NotImplemented
    if module.stride > 1:
        q, k, v = module.project(x)
        return local_attention_fused(q, k, v, module.rel_row, module.rel_col, module.heads, module.stride)
    # pad the input instead of q, k, v (a bias-free 1x1 projection of zero is zero) and project
    # it straight into the kernel's packed buffer: one pad, one batched GEMM (bmm with the
    # weight broadcast: no layout copies, unlike matmul or a 1x1 conv), one gradient buffer
    B, Cin, H, W = x.shape
    C = module.out_channels
    geometry = _fused_layout(H, W, module.kernel_size, 1)
    p, Wp, Lx = geometry[0], geometry[3], geometry[7]
    xf = F.pad(x, (p, Wp - W - p, p, Lx // Wp - H - p)).reshape(B, Cin, Lx)
    qkv = torch.bmm(w.view(1, 3 * C, Cin).expand(B, 3 * C, Cin), xf).view(B, 3, C, Lx)
    return _fused_apply(qkv, module.rel_row, module.rel_col, module.heads, H, W, module.kernel_size, 1, geometry,
                        save_attention=False)


overrides.register("local_self_attention", "local_attention", local_self_attention)
