"""Kernel ``hoga_gates``: the relaxed HOGA cell's full-size passes as three compiled operations.

Overrides :func:`attnas.kernels.grouped_mixed_op.grouped_mixed_op` (hook ``grouped_gates``) on CPU float32 / float64
tensors with :func:`grouped_mixed_op`: the same function in six full-size passes instead of
some thirty (``csrc/hoga_gates.cpp``). Shapes: ``x`` is ``(B, Gx, c, P)`` with ``P = H W``
and ``Gx`` either ``G`` (one input per edge) or 1 (one input shared by the ``G`` edges).

* :func:`gate_stats` -- the poolings of AutoLA Eqs. 4-6:
  ``avg = mean_P x``, ``mx = max_P x`` (``(B, Gx, c)``) and ``cmean = mean_c x``,
  ``cmax = max_c x`` (``(B, Gx, P)``).
* :func:`cbam_pool` -- CBAM's channel pooling after its channel gate (Eq. 8):
  ``mean_c (x g_c)`` and ``max_c (x g_c)``, ``(B, G, P)`` each, for ``g_c`` of ``(B, G, c)``.
* :func:`combine` -- the mixed edges (Eq. 13) once every gate is known:
  ``out = x * (sum_n w_n sigmoid(z_n) + a g_s + chan + spat)``, ``(B, G, c, P)``, with the
  normalization attentions' pre-activations ``z_n`` (``(B, G, c, P)``) and weights
  ``w_n`` (``(G,)``), CBAM's channel factor ``a`` (``(B, G, c)``) and spatial gate ``g_s``
  (``(B, G, P)``), the channel gates ``chan`` (``(B, G, c)``) and the spatial gates ``spat``
  (``(B, G, P)``).

The gradient of a maximum goes to the first maximal element, as in max pooling
(``torch.amax`` splits it among ties; the two agree wherever the maximum is unique).
"""

from __future__ import annotations

import ctypes

import torch

from attnas.kernels._build import KERNEL_DTYPES, Library
from attnas.ops import overrides
from attnas.kernels.grouped_mixed_op import channel_gates, spatial_gate
from attnas.ops.autola.hoga_relaxed import GroupedMixedOp
from attnas.ops.autola.small_conv import depthwise_pair, small_conv2d

_p, _i, _i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
LIBRARY = Library("hoga_gates", {
    "attnas_hoga_gate_stats": [_i, _p, _p, _p, _p, _p, _p, _p, _i64, _i, _i, _i64, _i],
    "attnas_hoga_gate_stats_backward": [_i, _p, _p, _p, _p, _p, _p, _p, _i64, _i, _i, _i64, _i],
    "attnas_hoga_cbam_pool": [_i, _p, _p, _p, _p, _p, _i64, _i, _i, _i, _i64, _i],
    "attnas_hoga_cbam_pool_backward": [_i, _p, _p, _p, _p, _p, _p, _p, _i64, _i, _i, _i, _i64, _i],
    "attnas_hoga_combine": [_i, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _i64, _i, _i, _i, _i64, _i],
    "attnas_hoga_combine_backward": [_i] + [_p] * 18 + [_i64, _i, _i, _i, _i64, _i],
})


def kernels_apply(x: torch.Tensor) -> bool:
    """Whether the compiled kernels run for ``x`` (CPU float32 / float64, library built)."""
    return x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and LIBRARY.load() is not None


def _call(name: str, *args) -> None:
    """Kernel ``attnas_hoga_<name>`` on ``args`` and torch's thread count."""
    LIBRARY.call(f"attnas_hoga_{name}", *args, torch.get_num_threads())


def _two(items: list | tuple) -> list:
    """The first two of ``items``, ``None`` for the missing (the kernels take at most two)."""
    return (list(items) + [None, None])[:2]


class _GateStats(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: D102 (autograd protocol)
        x = x.contiguous()
        B, Gx, c, P = x.shape
        avg, mx = x.new_empty(B, Gx, c), x.new_empty(B, Gx, c)
        cmean, cmax = x.new_empty(B, Gx, P), x.new_empty(B, Gx, P)
        amx_p = torch.empty(B, Gx, c, dtype=torch.int32)
        amx_c = torch.empty(B, Gx, P, dtype=torch.uint8)
        _call("gate_stats", KERNEL_DTYPES[x.dtype], x, avg, mx, amx_p, cmean, cmax, amx_c, B, Gx, c, P)
        ctx.save_for_backward(amx_p, amx_c)
        ctx.shape, ctx.dtype = x.shape, x.dtype
        return avg, mx, cmean, cmax

    @staticmethod
    def backward(ctx, d_avg, d_mx, d_cmean, d_cmax):  # noqa: D102 (autograd protocol)
        amx_p, amx_c = ctx.saved_tensors
        B, Gx, c, P = ctx.shape
        dx = torch.empty(ctx.shape, dtype=ctx.dtype)
        grads = [None if g is None else g.contiguous() for g in (d_avg, d_mx, d_cmean, d_cmax)]
        _call("gate_stats_backward", KERNEL_DTYPES[ctx.dtype], grads[0], grads[1], amx_p, grads[2], grads[3], amx_c, dx,
              B, Gx, c, P)
        return dx


class _CBAMPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gc):  # noqa: D102 (autograd protocol)
        x, gc = x.contiguous(), gc.contiguous()
        B, Gx, c, P = x.shape
        G = gc.shape[1]
        ymean, ymax = x.new_empty(B, G, P), x.new_empty(B, G, P)
        amx = torch.empty(B, G, P, dtype=torch.uint8)
        _call("cbam_pool", KERNEL_DTYPES[x.dtype], x, gc, ymean, ymax, amx, B, Gx, G, c, P)
        ctx.save_for_backward(x, gc, amx)
        return ymean, ymax

    @staticmethod
    def backward(ctx, d_ymean, d_ymax):  # noqa: D102 (autograd protocol)
        x, gc, amx = ctx.saved_tensors
        B, Gx, c, P = x.shape
        G = gc.shape[1]
        d_ymean = torch.zeros_like(amx, dtype=x.dtype) if d_ymean is None else d_ymean.contiguous()
        d_ymax = torch.zeros_like(amx, dtype=x.dtype) if d_ymax is None else d_ymax.contiguous()
        dx, dgc = torch.empty_like(x), torch.empty_like(gc)
        _call("cbam_pool_backward", KERNEL_DTYPES[x.dtype], x, gc, d_ymean, d_ymax, amx, dx, dgc, B, Gx, G, c, P)
        return dx, dgc


class _Combine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a, gs, chan, spat, *norm):  # noqa: D102 (autograd protocol)
        zs, ws = norm[: len(norm) // 2], norm[len(norm) // 2:]
        x, a, gs, chan, spat = (t.contiguous() for t in (x, a, gs, chan, spat))
        B, Gx, c, P = x.shape
        G = a.shape[1]
        ss = [torch.sigmoid(z).contiguous() for z in zs]
        ws = [w.contiguous() for w in ws]
        (s0, s1), (w0, w1) = _two(ss), _two(ws)
        out = x.new_empty(B, G, c, P)
        _call("combine", KERNEL_DTYPES[x.dtype], x, s0, s1, w0, w1, a, gs, chan, spat, out, B, Gx, G, c, P)
        ctx.save_for_backward(x, a, gs, chan, spat, *ss, *ws)
        ctx.n = len(ss)
        return out

    @staticmethod
    def backward(ctx, dout):  # noqa: D102 (autograd protocol)
        x, a, gs, chan, spat, *rest = ctx.saved_tensors
        ss, ws = rest[: ctx.n], rest[ctx.n:]
        B, Gx, c, P = x.shape
        G = a.shape[1]
        dout = dout.contiguous()
        (s0, s1), (w0, w1) = _two(ss), _two(ws)
        dx, da, dgs, dchan, dspat = (torch.empty_like(t) for t in (x, a, gs, chan, spat))
        dss = [torch.empty_like(s) for s in ss]
        ds0, ds1 = _two(dss)
        dw = x.new_empty(2, G)
        _call("combine_backward", KERNEL_DTYPES[x.dtype], dout, x, s0, s1, w0, w1, a, gs, chan, spat, dx, ds0, ds1, dw,
              da, dgs, dchan, dspat, B, Gx, G, c, P)
        return (dx, da, dgs, dchan, dspat, *dss, *dw[: ctx.n].unbind(0))  # dss: d loss / d z_n


def gate_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(mean_P x, max_P x, mean_c x, max_c x)`` of ``x`` ``(B, Gx, c, P)``, differentiable."""
    return _GateStats.apply(x)


def cbam_pool(x: torch.Tensor, gc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean_c (x g_c), max_c (x g_c))`` for ``x`` ``(B, Gx, c, P)`` and ``g_c`` ``(B, G, c)``."""
    return _CBAMPool.apply(x, gc)


def combine(x: torch.Tensor, a: torch.Tensor, gs: torch.Tensor, chan: torch.Tensor, spat: torch.Tensor,
            zs: list[torch.Tensor], ws: list[torch.Tensor]) -> torch.Tensor:
    """``x * (sum_n w_n sigmoid(z_n) + a g_s + chan + spat)``, ``(B, G, c, P)``; at most two ``z_n``."""
    if len(zs) != len(ws) or len(zs) > 2:
        raise ValueError(f"combine takes at most two normalization gates with one weight each, got {len(zs)}, {len(ws)}")
    return _Combine.apply(x, a, gs, chan, spat, *zs, *ws)


def grouped_mixed_op(self: GroupedMixedOp, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Override of :func:`attnas.kernels.grouped_mixed_op.grouped_mixed_op`: the same function in six full-size passes
    instead of some thirty (up to float rounding and the routing of tied maxima)."""
    if not kernels_apply(x):
        return NotImplemented
    B, _, H, W = x.shape
    G, c, P = self.groups, self.channels, H * W
    x = x.contiguous()
    Gx = 1 if self.shared_input else G
    xs = x.view(B, Gx, c, P)
    col = {name: weights[:, i] for i, name in enumerate(self.ops)}  # (G,) each
    chan = a = gs = spat = None
    if self.families or self.spatial:
        avg, mx, cmean, cmax = gate_stats(xs)
    if self.families:
        pooled = (torch.stack((avg, mx)) if self._needs_max else avg[None]).expand(-1, B, G, c)
        sig, chan = channel_gates(self, pooled, col)
        if "cbam" in col:
            gc = sig[self.families.index("cbam")]  # (B, G, c)
            ps = torch.stack(cbam_pool(xs, gc), 2).view(B, G, 2, H, W)
            gs = spatial_gate(self, "cbam_bn", ps, self.cbam_conv, 1).reshape(B, G, P)
            a = gc * col["cbam"][None, :, None]
    if "identity" in col:
        ident = col["identity"][None, :, None]
        chan = ident.expand(B, G, c) if chan is None else chan + ident
    if self.spatial:
        ps = torch.stack((cmean, cmax), 2).view(B, Gx, 2, H, W)
        for n, d in self.spatial:
            g = spatial_gate(self, f"{n}_bn", ps, getattr(self, f"{n}_conv"), d) * col[n][None, :, None, None]
            spat = g if spat is None else spat + g
        spat = spat.reshape(B, G, P)
    zs, ws = [], []
    if len(self.norm) == 2:  # both dilations in one kernel call each way, the input read once
        (n1, d1), (n2, d2) = self.norm
        pair = depthwise_pair(x, getattr(self, f"{n1}_weight"), getattr(self, f"{n1}_bias"), d1,
                              getattr(self, f"{n2}_weight"), getattr(self, f"{n2}_bias"), d2)
        zs = [z.view(B, G, c, P) for z in pair]
        ws = [col[n1], col[n2]]
    elif self.norm:
        src = x.repeat(1, G, 1, 1) if self.shared_input and G > 1 else x  # one filter bank per edge
        for n, d in self.norm:
            z = small_conv2d(src, getattr(self, f"{n}_weight"), getattr(self, f"{n}_bias"), d, G * c)
            zs.append(z.view(B, G, c, P))
            ws.append(col[n])
    small, plane = x.new_zeros(B, G, c), x.new_zeros(B, G, P)
    out = combine(xs, small if a is None else a, plane if gs is None else gs, small if chan is None else chan,
                  plane if spat is None else spat, zs, ws)
    return out.view(B, G * c, H, W)


overrides.register("grouped_gates", "hoga_gates", grouped_mixed_op)
