"""Kernel ``grouped_mixed_op``: the mixed operations (AutoLA Eq. 13) of all edges of a
:class:`~attnas.ops.autola.hoga_relaxed.GroupedMixedOp` evaluated together. Pure PyTorch.

Overrides :meth:`GroupedMixedOp.forward` (hook ``grouped_mixed_op``), which computes each edge's
operations one by one. Two facts make the grouped form faster:

* every operation of the pool is a gate, ``o(x) = g_o(x) * x`` (identity: ``g = 1``, zero:
  ``g = 0``), so a mixed edge is ``x * sum_o w_o g_o(x)``: the gates, most of them small
  (``(B, C, 1, 1)`` or ``(B, 1, H, W)``), are summed first and ``x`` is multiplied once;
  pooled statistics are computed once per input and shared by the operations that use them;
* the ``K`` edges ``F_k -> U_k`` act on disjoint channel groups of one tensor, and the edges
  leaving a node ``U_j`` all read the same tensor, so the operations of a kind on all those
  edges run as one grouped convolution / one batched matrix product with the stacked weights.

The element-wise work is done on contiguous ``(B, G, c, H, W)`` tensors (long inner loops for
the broadcast gates and reductions; a channels-last ``(B, H, W, G, c)`` layout measured
1.1-1.5x slower here because of its inner dimensions of 3-4), the convolutions in channels-last
layout. The compiled kernel ``hoga_gates`` replaces :func:`grouped_mixed_op` in turn (hook
``grouped_gates``), and ``small_conv`` its convolutions (hook ``gate_conv``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.ops import overrides
from attnas.ops.autola.attention_modules import channel_gate
from attnas.ops.autola.gate_pooling import mean
from attnas.ops.autola.hoga_relaxed import GroupedMixedOp
from attnas.ops.overrides import overridable


@overridable("gate_conv")
def gate_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int, groups: int) -> torch.Tensor:
    """A stride-1 "same" convolution with few channels per group, returned NCHW-contiguous for
    the element-wise work: ``conv2d`` in channels-last layout (faster than NCHW for depth-wise
    and small grouped convolutions in oneDNN)."""
    return conv_cl(x.contiguous(memory_format=torch.channels_last), weight, bias, dilation, groups).contiguous()


def conv_cl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int,
             groups: int) -> torch.Tensor:
    """The same convolution by ``conv2d`` on a channels-last input, output channels-last."""
    return F.conv2d(x, weight, bias, 1, dilation * (weight.shape[-1] - 1) // 2, dilation, groups)


def spatial_gate(m: GroupedMixedOp, prefix: str, pooled: torch.Tensor, weight: torch.Tensor, dilation: int) -> torch.Tensor:
    """``sigmoid(BN(conv(pooled)))`` (Eqs. 6, 8), ``(B, G, H, W)``; ``pooled`` is ``(B, G|1, 2, H, W)``."""
    B, P, _, H, W = pooled.shape
    z = gate_conv(pooled.reshape(B, 2 * P, H, W), weight, None, dilation, P)  # a pair per edge, or one for all
    return torch.sigmoid(F.batch_norm(z, getattr(m, f"{prefix}_mean"), getattr(m, f"{prefix}_var"),
                                      getattr(m, f"{prefix}_weight"), getattr(m, f"{prefix}_bias"),
                                      m.training, 0.1, 1e-5))

def channel_gates(m: GroupedMixedOp, pooled: torch.Tensor, col: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The channel-attention sigmoids ``(F, B, G, c)`` of every family (Eqs. 4, 5, 8) and
    their weighted sum without CBAM's (CBAM multiplies its own by a spatial gate), from
    the pooled ``(2|1, B, G, c)`` average (and maximum)."""
    sig = channel_gate(pooled, m.mlp1, m.mlp2, m._keep_max[:, None, None, None])  # (F, B, G, c)
    mix = torch.stack([col[f] if f != "cbam" else torch.zeros_like(col[f]) for f in m.families])
    return sig, torch.einsum("fbgc,fg->bgc", sig, mix)

@overridable("grouped_gates")
def grouped_mixed_op(m: GroupedMixedOp, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Override of :meth:`GroupedMixedOp.forward`: ``sum_o w[g, o] o_g(x_g)`` for every edge ``g``
    (Eq. 13), the gates summed first."""
    B, _, H, W = x.shape
    G, c = m.groups, m.channels
    x_in = x
    x = x.contiguous()  # the elementwise work is fastest with H, W innermost
    xe = x[:, None] if m.shared_input else x.view(B, G, c, H, W)  # (B, G|1, c, H, W)
    col = {name: weights[:, i] for i, name in enumerate(m.ops)}  # (G,) each
    chan = None  # (B, G, c)
    full = None  # (B, G, c, H, W)
    spat = None  # (B, G, H, W)

    if m.norm:
        # Depth-wise convolutions, their sigmoids and their weighted sum in channels-last
        # layout (same-shape element-wise work is layout-blind), converted once at the end.
        src = x_in.contiguous(memory_format=torch.channels_last)
        if m.shared_input and G > 1:  # one filter bank per edge: the input read G times
            src = src.repeat(1, G, 1, 1).contiguous(memory_format=torch.channels_last)
        for n, d in m.norm:
            z = conv_cl(src, getattr(m, f"{n}_weight"), getattr(m, f"{n}_bias"), d, G * c)
            w = col[n].repeat_interleave(c)[None, :, None, None]  # (1, G c, 1, 1)
            full = torch.sigmoid(z) * w if full is None else torch.addcmul(full, torch.sigmoid(z), w)
        full = full.contiguous().view(B, G, c, H, W)

    if m.families:
        avg = mean(xe, (3, 4)).expand(B, G, c)
        pooled = torch.stack((avg, xe.amax((3, 4)).expand(B, G, c))) if m._needs_max else avg[None]
        sig, chan = channel_gates(m, pooled, col)
        if "cbam" in col:
            gc = sig[m.families.index("cbam")]  # (B, G, c)
            y = xe * gc[..., None, None]  # (B, G, c, H, W)
            ps = torch.stack((mean(y, 2), y.amax(2)), 2)  # (B, G, 2, H, W)
            gs = spatial_gate(m, "cbam_bn", ps, m.cbam_conv, 1)[:, :, None]  # (B, G, 1, H, W)
            a = (gc * col["cbam"][None, :, None])[..., None, None]  # (B, G, c, 1, 1)
            full = a * gs if full is None else torch.addcmul(full, a, gs)
    if "identity" in col:
        ident = col["identity"][None, :, None]
        chan = ident.expand(B, G, c) if chan is None else chan + ident

    if m.spatial:
        ps = torch.stack((mean(xe, 2), xe.amax(2)), 2)  # (B, G|1, 2, H, W)
        for n, d in m.spatial:
            g = spatial_gate(m, f"{n}_bn", ps, getattr(m, f"{n}_conv"), d) * col[n][None, :, None, None]
            spat = g if spat is None else spat + g

    gate, fresh = full, False  # fresh: ``gate`` is a new full-size sum that may be added to in place
    if chan is not None:
        fresh = gate is not None
        gate = chan[..., None, None] if gate is None else gate + chan[..., None, None]
    if spat is not None:
        if gate is None:
            gate = spat[:, :, None]
        else:
            gate = gate.add_(spat[:, :, None]) if fresh else gate + spat[:, :, None]
    if gate is None:  # a pool of only "zero"
        return x.new_zeros(B, G * c, H, W)
    return (xe * gate).reshape(B, G * c, H, W)


overrides.register("grouped_mixed_op", "grouped_mixed_op", grouped_mixed_op)
