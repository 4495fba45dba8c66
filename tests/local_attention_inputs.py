"""Random inputs of local self-attention, shared by the eager and fused kernel tests.

Not a test module: imported as ``from local_attention_inputs import local_attention_inputs``
(``tests/`` is on ``sys.path`` because it holds ``conftest.py``).
"""

from __future__ import annotations

import torch


def local_attention_inputs(B, C, H, W, ks, dtype=torch.float64, seed=0):
    """``q, k, v`` of shape ``[B, C, H, W]`` and ``rel_row, rel_col`` of shape ``[C/2, ks]``,
    all leaf tensors that require grad, drawn from one seeded generator."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, C, H, W, generator=g, dtype=dtype, requires_grad=True) for _ in range(3))
    rel_row = torch.randn(C // 2, ks, generator=g, dtype=dtype, requires_grad=True)
    rel_col = torch.randn(C // 2, ks, generator=g, dtype=dtype, requires_grad=True)
    return q, k, v, rel_row, rel_col
