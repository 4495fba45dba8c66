"""Standard image augmentation on batched tensors (no torchvision needed).

Pad-and-crop (pad by ``p`` zeros, take a random ``H x W`` window) and random horizontal
flips, each drawn independently per image from an optional ``torch.Generator``, applied to
float images ``(B, C, H, W)`` on any device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def random_crop(x: torch.Tensor, padding: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Pad each image by ``padding`` zeros on every side and crop a random window of the original size.

    Args:
        x: Images ``(B, C, H, W)``.
        padding: Zeros added on each side; 0 returns ``x``.
        generator: Source of the random offsets (CPU generator).

    Returns:
        Images of the same shape.
    """
    if padding <= 0:
        return x
    B, C, H, W = x.shape
    padded = F.pad(x, (padding, padding, padding, padding))
    off_y = torch.randint(0, 2 * padding + 1, (B,), generator=generator).to(x.device)
    off_x = torch.randint(0, 2 * padding + 1, (B,), generator=generator).to(x.device)
    rows = off_y[:, None] + torch.arange(H, device=x.device)  # (B, H)
    cols = off_x[:, None] + torch.arange(W, device=x.device)  # (B, W)
    batch = torch.arange(B, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)
    return out.permute(0, 3, 1, 2).contiguous()


def random_flip(x: torch.Tensor, generator: torch.Generator | None = None, p: float = 0.5) -> torch.Tensor:
    """Mirror each image left-right with probability ``p``.

    Args:
        x: Images ``(B, C, H, W)``.
        generator: Source of the coin flips (CPU generator).
        p: Flip probability.
    """
    flip = (torch.rand(x.shape[0], generator=generator) < p).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(-1), x)
