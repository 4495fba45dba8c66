"""Parameter and FLOP counts, as in the paper's tables.

AutoLA's "FLOPS(G)" column (Tables 1-6) counts multiply-accumulates: ResNet-20 on a 32 x 32
CIFAR image is listed at 0.04 G, the well-known ~41 M multiply-adds of that network.
:func:`count_macs` therefore reports multiply-accumulates: PyTorch's
:class:`~torch.utils.flop_counter.FlopCounterMode` counts ``2`` FLOPs per multiply-add of the
convolutions and matrix products, and the total is halved. Element-wise work (activations,
gates, batch norm) is not counted, as is customary for these tables.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (shared parameters counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@torch.no_grad()
def count_macs(model: nn.Module, example: Any) -> int:
    """Multiply-accumulates of one forward pass of ``model(example)`` (in eval mode).

    Args:
        model: The network.
        example: Its input (e.g. one ``(1, C, H, W)`` image or a batch ``(x, y)``); the count is
            for the whole example, so pass a single image for per-image figures.
    """
    was_training = model.training
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter:
            model(example)
    finally:
        model.train(was_training)
    return counter.get_total_flops() // 2


def complexity(model: nn.Module, example: Any) -> dict[str, float]:
    """``{"params": ..., "params_m": ..., "macs": ..., "gmacs": ...}`` for tables like Table 1."""
    params, macs = count_parameters(model), count_macs(model, example)
    return {"params": params, "params_m": params / 1e6, "macs": macs, "gmacs": macs / 1e9}
