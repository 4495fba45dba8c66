"""Fixed sinusoidal position encodings (Vaswani et al., NeurIPS 2017, Sec. 3.5)."""

from __future__ import annotations

import math

import torch


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    r"""``PE[pos, 2i] = sin(pos / 10000^{2i/d})``, ``PE[pos, 2i+1] = cos(pos / 10000^{2i/d})``.

    Args:
        length: Number of positions.
        dim: Encoding size ``d``.

    Returns:
        ``[length, dim]`` encodings.
    """
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe
