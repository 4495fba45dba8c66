"""Inverted dropout whose mask is a counter-based hash of one seed (fast on the CPU).

Same distribution as :func:`torch.nn.functional.dropout` (Srivastava et al., 2014): each
element is kept with probability ``1 - p`` and scaled by ``1 / (1 - p)``, independently.
The mask is drawn differently: one 63-bit ``seed`` is taken from torch's default
(CPU) generator per call, and element ``i`` (flat, row-major) is kept when

.. math::
    \\lfloor \\mathrm{splitmix64}(seed + (i + 1) \\gamma) / 2^{32} \\rfloor \\ge \\lfloor p \\, 2^{32} \\rfloor,
    \\qquad \\gamma = \\mathtt{0x9E3779B97F4A7C15},

the 64-bit finaliser of SplitMix (Steele, Lea and Flood, OOPSLA 2014), whose outputs pass
BigCrush. So ``p`` is honoured to within ``2^{-32}``; a run is reproducible from
``torch.manual_seed`` (and resumes exactly, since the generator's state is checkpointed);
and the mask does not depend on the thread count or the device.

The hash is computed with torch's 64-bit integer operations (:func:`mask_reference`);
torch's CPU ``uniform_`` is a serial Mersenne Twister, and ``bernoulli_``, which ``F.dropout``
uses, is slower still, so a counter-based hash is also the fast choice for an accelerated
implementation (hook ``dropout_mask``), which must give the same mask bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn

from attnas.ops.overrides import overridable

_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _signed(v: int) -> int:
    """A 64-bit unsigned constant as the int64 with the same bits."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def threshold_of(p: float) -> int:
    """``floor(p * 2**32)``: elements whose hash's top 32 bits are below it are dropped."""
    return min(int(p * 2**32), 2**32 - 1)


def mask_reference(shape: torch.Size | tuple[int, ...], seed: int, p: float, dtype: torch.dtype = torch.float32,
                   device: torch.device | str = "cpu") -> torch.Tensor:
    """The dropout mask (``1 / (1 - p)`` where kept, 0 where dropped) from torch integer operations.

    Int64 products wrap modulo ``2**64``, which is the unsigned arithmetic of SplitMix.
    """
    n = 1
    for s in shape:
        n *= int(s)
    z = torch.arange(1, n + 1, dtype=torch.int64, device=device) * _signed(_GAMMA) + _signed(seed)
    z = (z ^ _shr(z, 30)) * _signed(_MIX1)
    z = (z ^ _shr(z, 27)) * _signed(_MIX2)
    z = z ^ _shr(z, 31)
    keep = _shr(z, 32) >= threshold_of(p)
    return keep.to(dtype).mul_(1.0 / (1.0 - p)).reshape(shape)


def dropout_mask(x: torch.Tensor, p: float, seed: int | None = None) -> torch.Tensor:
    """The mask of one dropout call on ``x`` (``x``'s shape, dtype and device), ``0 < p < 1``.

    Args:
        x: The tensor to drop elements of (only its shape, dtype and device are used).
        p: Drop probability.
        seed: The 63-bit seed; drawn from torch's default generator when omitted.
    """
    if seed is None:
        seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    return _mask(x, p, seed)


@overridable("dropout_mask")
def _mask(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """:func:`dropout_mask` once the seed is drawn."""
    return mask_reference(x.shape, seed, p, x.dtype, x.device)


def fast_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout of ``x`` with drop probability ``p`` (mask of :func:`dropout_mask`)."""
    if not training or p <= 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * dropout_mask(x, p)


class FastDropout(nn.Module):
    """Module form of :func:`fast_dropout`.

    Args:
        p: Drop probability.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
