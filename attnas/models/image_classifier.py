"""Adapter from the task's batches to an image network.

Models in attnas take one batch (``model(batch)``); an image classification batch is an
``(images, labels)`` pair. :class:`ImageClassifier` hands the images to the wrapped network.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def images_of(batch: Any) -> torch.Tensor:
    """The image tensor of a batch: ``batch[0]`` of an ``(x, y)`` pair, or the tensor itself."""
    return batch[0] if isinstance(batch, (tuple, list)) else batch


class ImageClassifier(nn.Module):
    """Runs ``net`` on the images of a batch.

    Args:
        net: A network mapping ``(B, C, H, W)`` images to ``(B, num_classes)`` logits.

    Shapes:
        - input: an ``(x, y)`` batch with ``x`` of shape ``(B, C, H, W)``, or ``x`` itself
        - output: ``(B, num_classes)``
    """

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, batch: Any) -> torch.Tensor:
        """Class logits of a batch of images.

        Args:
            batch: A float tensor ``[B, channels, H, W]`` of images normalised as the task's
                training data (per-channel mean and std), or an ``(images, labels)`` pair as
                the image-classification task yields.

        Returns:
            ``[B, classes]`` logits.
        """
        return self.net(images_of(batch))
