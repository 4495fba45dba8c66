"""The encoder-decoder of the context auto-regression search (Zhou et al., 2021, Sec. III.C, Fig. 3).

"The macro-architecture [...] is used as the encoder to extract the features. Then, the
feature is passed through a series of up-sampling layers to produce the prediction."
The encoder is the stage-wise network without its classifier (its ``features(x)``: a map
``[B, 4*init_channels, ceil(H/4), ceil(W/4)]``); :class:`CARDecoder` brings it back to the
image. Each up-sampling layer doubles the resolution (nearest neighbour) and applies a
3x3 convolution and a ReLU, halving the channels; a last 3x3 convolution predicts the
pixels. The paper does not specify the decoder further.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from attnas.core.errors import ConfigError, DataError

__all__ = ["CARDecoder", "ContextAutoregressionModel"]


class CARDecoder(nn.Module):
    """Up-sampling decoder from encoder features to an image.

    Args:
        in_channels: Channels of the encoder's feature map.
        out_channels: Image channels.
        upsamplings: Number of x2 up-sampling layers (2 undoes the stage-wise network's
            two stride-2 stages).
        min_channels: Lower bound of the halved widths.

    Shapes:
        - **input:** ``[B, in_channels, h, w]`` (and the target ``size``)
        - **output:** ``[B, out_channels, *size]`` (``[B, out_channels, h*2**u, w*2**u]`` without ``size``)
    """

    def __init__(self, in_channels: int, out_channels: int, upsamplings: int = 2, min_channels: int = 8):
        super().__init__()
        if in_channels < 1 or out_channels < 1 or upsamplings < 0:
            raise ConfigError(
                f"CARDecoder: channels must be positive and upsamplings >= 0, got {in_channels}, {out_channels}, {upsamplings}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        layers: list[nn.Module] = []
        c = in_channels
        for _ in range(upsamplings):
            c_next = max(min_channels, c // 2)
            layers += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c, c_next, 3, padding=1), nn.ReLU()]
            c = c_next
        layers.append(nn.Conv2d(c, out_channels, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, features: Tensor, size: tuple[int, int] | None = None) -> Tensor:
        if features.dim() != 4 or features.shape[1] != self.in_channels:
            raise DataError(f"CARDecoder expects features [B, {self.in_channels}, h, w], got {tuple(features.shape)}")
        out = self.body(features)
        if size is not None and tuple(out.shape[-2:]) != tuple(size):
            out = F.interpolate(out, size=tuple(size), mode="bilinear", align_corners=False)
        return out


class ContextAutoregressionModel(nn.Module):
    """Encoder (with ``features(x)``) plus :class:`CARDecoder`: masked image -> image.

    The encoder is typically a :class:`~attnas.models.stagewise_network.RelaxedStagewiseNetwork`,
    so the architecture parameters learnt here are the ones the classification fine-tuning
    starts from. Its classifier is not used (and receives no gradient).

    Args:
        encoder: A module with ``features(x)`` and ``out_channels``.
        image_channels: Channels of the reconstructed image.
        upsamplings: See :class:`CARDecoder`.

    Shapes:
        - **input:** masked images ``[B, C, H, W]``
        - **output:** reconstruction ``[B, C, H, W]``
    """

    def __init__(self, encoder: nn.Module, image_channels: int, upsamplings: int = 2):
        super().__init__()
        if not hasattr(encoder, "features"):
            raise ConfigError(f"context auto-regression needs an encoder with features(x); {type(encoder).__name__} has none")
        self.encoder = encoder
        self.decoder = CARDecoder(encoder.out_channels, image_channels, upsamplings)

    def forward(self, masked_images: Tensor) -> Tensor:
        return self.decoder(self.encoder.features(masked_images), size=tuple(masked_images.shape[-2:]))

    def arch_parameters(self) -> list[nn.Parameter]:
        """The encoder's architecture parameters (empty for a discrete encoder)."""
        fn: Any = getattr(self.encoder, "arch_parameters", None)
        return list(fn()) if fn is not None else []

    def weight_parameters(self) -> list[nn.Parameter]:
        """Encoder weights (without its unused classifier) and decoder weights."""
        arch = {id(p) for p in self.arch_parameters()}
        skip = {id(p) for p in getattr(self.encoder, "classifier", nn.Identity()).parameters()}
        return [p for p in self.parameters() if id(p) not in arch and id(p) not in skip]
