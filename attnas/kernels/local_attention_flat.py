r"""Kernel ``local_attention_flat``: local self-attention without unfolded copies, in PyTorch.

The eager :func:`attnas.ops.fullattn.local_self_attention.local_attention` (SASA Eq. 3) gathers every
``k x k`` window with ``unfold``, materialising ``k*k`` copies of the keys and values.
:func:`local_attention_flat` computes the same result without them: windows are strided
*views* of a flattened, padded map (see :func:`_flat_geometry`) and every product with them
is an in-place multiply-add (one per head channel for the logits, one per window offset for
the weighted sums); the relative term and the border mask are separable into row and column
parts; the softmax uses ``exp2``; the backward pass is written by hand and scatters key/value
gradients through the same strided views. The batch is processed in cache-sized chunks. The
attention weights are kept for the backward pass by default (``save_attention=False``
recomputes them chunk by chunk instead).

No C++: plain PyTorch operations, on any device. Overrides
:meth:`attnas.ops.fullattn.local_self_attention.LocalSelfAttention.attend` (hook ``local_attention``)
where the compiled kernel ``local_attention`` did not run (off the CPU, a window wider than
it handles, the kernel switched off or not built). Its flat layout is also the one of the
compiled kernel.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnas.ops import overrides
from attnas.ops.fullattn.local_self_attention import check_inputs, strided_queries, window_geometry

@functools.lru_cache(maxsize=256)
def _flat_geometry(H: int, W: int, ks: int, stride: int) -> tuple[int, int, int, int, int, int, int]:
    """Sizes of the flattened layout used by :func:`local_attention_flat`.

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
    p, Ho, Wo = window_geometry(H, W, ks, stride)
    Wp = W + 2 * p
    N = Ho * Wp
    T0 = (ks - 1) * Wp + (ks - 1)
    return p, Ho, Wo, Wp, _padded_height(H, p, Wp, T0, stride, N), N, T0


def _padded_height(H: int, p: int, Wp: int, T0: int, stride: int, queries: int) -> int:
    """Rows ``Hp`` of the padded key map: at least ``H + 2p``, and enough that the last of
    ``queries`` flat queries finds its whole window (flat element ``T0 + stride*(queries-1)``)."""
    need = T0 + stride * (queries - 1) + 1
    return max(H + 2 * p, -(-need // Wp))


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


def local_attention_flat(q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor,
                    heads: int, stride: int = 1, chunk_size: int | None = None,
                    save_attention: bool = True) -> Tensor:
    """Local multi-head self-attention without unfolded copies (SASA Eq. 3; flat layout).

    Same result as :func:`attnas.ops.fullattn.local_self_attention.local_attention` to float
    precision (see the module docstring for the layout). Works on any device; on CPU it
    processes the batch in chunks whose working set stays in cache.

    The arguments ``q, k, v, rel_row, rel_col, heads, stride`` and the shapes are those of
    :func:`~attnas.ops.fullattn.local_self_attention.local_attention`.

    Args:
        chunk_size: Images per chunk (default: :func:`_chunk_size`).
        save_attention: Keep the attention weights (``B*heads*ks*ks`` floats per output
            position) for the backward pass instead of recomputing them chunk by chunk:
            about 30% faster forward+backward, at that memory cost. Ignored without grad.

    Returns:
        ``[B, C, ceil(H/s), ceil(W/s)]``.
    """
    ks = check_inputs(q, k, v, rel_row, rel_col, heads, stride)
    B, C, H, W = k.shape
    p, Ho, Wo, Wp, Hp, N, T0 = _flat_geometry(H, W, ks, stride)
    q = strided_queries(q, H, W, stride)
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


def attend(module: nn.Module, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Override of :meth:`~attnas.ops.fullattn.local_self_attention.LocalSelfAttention.attend`."""
    return local_attention_flat(q, k, v, module.rel_row, module.rel_col, module.heads, module.stride,
                                save_attention=module.save_attention)


overrides.register("local_attention", "local_attention_flat", attend)
