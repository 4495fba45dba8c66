"""Context auto-regression: the self-supervised pretext of the full-attention search.

Zhou et al., 2021, Sec. III.C and Fig. 3: "several regions on the input image are
randomly masked before it is fed into an encoder-decoder network. [...] The network is
trained by regressing the ground truth content. L1 loss is used as the reconstruction
loss [...]. Instead of choosing a single mask at a fixed location, several smaller,
possibly overlapping, random masks are added that cover up to 1/4 of the image."

This module holds the data-side pieces (which pixels are hidden, the masked input and the
loss); the encoder-decoder is :class:`attnas.models.car_decoder.ContextAutoregressionModel`.
Masks are drawn from a :class:`torch.Generator`, so a seed reproduces them exactly.

Mask recipe (per image): ``n`` boxes with ``n`` uniform in ``1..max_boxes``; each box gets
at most ``floor(max_fraction * H * W / n)`` pixels (height uniform in ``1..min(H, budget)``,
width uniform in ``1..min(W, budget // height)``) at a uniform position inside the image.
The union of the boxes therefore covers at least one pixel and at most ``max_fraction``
(1/4) of the image; boxes may overlap.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnas.core.errors import ConfigError, DataError

__all__ = ["context_masks", "mask_images", "masked_l1_loss"]


def context_masks(batch_size: int, height: int, width: int, *, generator: torch.Generator | None = None,
                  max_fraction: float = 0.25, max_boxes: int = 4, device: torch.device | str | None = None) -> Tensor:
    """Random rectangular masks, several per image, covering at most ``max_fraction``.

    Args:
        batch_size: Number of masks ``B``.
        height: Image height ``H``.
        width: Image width ``W``.
        generator: Source of randomness (a seeded generator reproduces the masks).
        max_fraction: Largest fraction of the image the union of the boxes may cover
            (paper: 1/4).
        max_boxes: Largest number of boxes per image.
        device: Where the masks are made (the generator's device).

    Returns:
        A boolean tensor ``[B, 1, H, W]``, ``True`` where the image is hidden.
    """
    if not 0.0 < max_fraction <= 1.0:
        raise ConfigError(f"context masks: max_fraction must be in (0, 1], got {max_fraction}")
    if max_boxes < 1:
        raise ConfigError(f"context masks: max_boxes must be >= 1, got {max_boxes}")
    if height < 1 or width < 1 or batch_size < 0:
        raise ConfigError(f"context masks: bad size {batch_size} x {height} x {width}")
    budget_total = int(max_fraction * height * width)
    if budget_total < 1:
        raise ConfigError(
            f"context masks: a {height}x{width} image is too small to hide any pixel with max_fraction={max_fraction}"
        )
    dev = torch.device(device) if device is not None else (generator.device if generator is not None else torch.device("cpu"))

    def uniform(shape: tuple[int, ...]) -> Tensor:
        return torch.rand(shape, generator=generator, device=dev)

    B, K = batch_size, max_boxes
    n_boxes = 1 + (uniform((B, 1)) * K).long().clamp_max(K - 1)  # [B, 1] in 1..K
    active = torch.arange(K, device=dev).view(1, K) < n_boxes  # [B, K]
    budget = (budget_total // n_boxes).clamp_min(1)  # pixels per box
    h_max = budget.clamp_max(height)
    box_h = 1 + (uniform((B, K)) * h_max).long().clamp_max(h_max - 1)
    w_max = (budget // box_h).clamp(1, width)
    box_w = 1 + (uniform((B, K)) * w_max).long().clamp_max(w_max - 1)
    top = (uniform((B, K)) * (height - box_h + 1)).long()
    left = (uniform((B, K)) * (width - box_w + 1)).long()
    rows = torch.arange(height, device=dev).view(1, 1, height, 1)
    cols = torch.arange(width, device=dev).view(1, 1, 1, width)

    def grid(t: Tensor) -> Tensor:
        return t.view(B, K, 1, 1)

    inside = (
        (rows >= grid(top)) & (rows < grid(top + box_h)) & (cols >= grid(left)) & (cols < grid(left + box_w))
        & grid(active)
    )
    return inside.any(dim=1, keepdim=True)


def mask_images(images: Tensor, mask: Tensor, fill: float = 0.0) -> Tensor:
    """The encoder's input: ``images`` with the masked pixels set to ``fill`` (all channels).

    Args:
        images: ``[B, C, H, W]``.
        mask: Boolean ``[B, 1, H, W]`` (``True`` = hidden).
        fill: Value of hidden pixels (0 is the mean of standardised images).

    Returns:
        ``[B, C, H, W]``.
    """
    _check(images, mask)
    return images.masked_fill(mask, fill)


def masked_l1_loss(reconstruction: Tensor, images: Tensor, mask: Tensor) -> Tensor:
    """Mean absolute error on the hidden pixels only (Zhou et al., 2021, Sec. III.C, L1 loss).

    Args:
        reconstruction: Decoder output ``[B, C, H, W]``.
        images: Original images ``[B, C, H, W]``.
        mask: Boolean ``[B, 1, H, W]`` (``True`` = hidden, where the loss is taken).

    Returns:
        A scalar: ``sum(|reconstruction - images| * mask) / (C * number of hidden pixels)``.
    """
    _check(images, mask)
    if reconstruction.shape != images.shape:
        raise DataError(f"masked L1: reconstruction {tuple(reconstruction.shape)} != images {tuple(images.shape)}")
    weight = mask.to(images.dtype)
    hidden = weight.sum() * images.shape[1]
    return ((reconstruction - images).abs() * weight).sum() / hidden.clamp_min(1.0)


def _check(images: Tensor, mask: Tensor) -> None:
    if images.dim() != 4:
        raise DataError(f"context auto-regression: images must be [B, C, H, W], got {tuple(images.shape)}")
    B, _, H, W = images.shape
    if mask.dtype != torch.bool or tuple(mask.shape) != (B, 1, H, W):
        raise DataError(f"context auto-regression: mask must be a bool [B, 1, H, W] = {(B, 1, H, W)}, "
                        f"got {mask.dtype} {tuple(mask.shape)}")
