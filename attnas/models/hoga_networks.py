"""Backbones carrying HOGA cells: the discrete network and the relaxed supernet.

:func:`hoga_network` places a discrete :class:`~attnas.ops.autola.hoga_cell.HOGA` cell in every
residual block of a CIFAR ResNet (AutoLA Sec. 4.2). :class:`RelaxedHOGANetwork` places a
:class:`~attnas.ops.autola.hoga_relaxed.RelaxedHOGA` cell in every block instead; all cells share one
architecture-weight matrix ``alpha`` (one searched cell is used everywhere), exposed by
:meth:`RelaxedHOGANetwork.arch_parameters` and kept apart from
:meth:`RelaxedHOGANetwork.weight_parameters`, as first-order DARTS needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from attnas.models.image_classifier import images_of
from attnas.models.resnet_cifar import CifarResNet, cifar_resnet
from attnas.ops.autola.hoga_cell import HOGA, hoga_edges
from attnas.ops.autola.hoga_relaxed import RelaxedHOGA, init_alpha
from attnas.ops.autola.attention_modules import HOGA_OPS


def hoga_factory(edges: Mapping[str, str], groups: int = 4, reduction: int = 4,
                 phi_reduction: int = 16) -> Callable[[int], HOGA]:
    """A ``channels -> HOGA`` factory for ``attn_layer=`` or :func:`~attnas.models.attach.attach_attention`.

    Args:
        edges: Operation of every edge ``"j-k"`` (an architecture's ``choices["edges"]``).
        groups: ``K``.
        reduction: Reduction ratio of the edges' channel attention.
        phi_reduction: Reduction ratio of the channel attention in phi.
    """
    edges = dict(edges)

    def make(channels: int) -> HOGA:
        return HOGA(channels, edges, groups, reduction, phi_reduction)

    return make


def hoga_network(backbone: str, edges: Mapping[str, str], *, groups: int = 4, num_classes: int = 10,
                 in_channels: int = 3, width: int = 16, reduction: int = 4, phi_reduction: int = 16) -> CifarResNet:
    """A CIFAR ResNet with the discrete HOGA cell ``edges`` in every residual block."""
    return cifar_resnet(backbone, num_classes, in_channels, width,
                        attn_layer=hoga_factory(edges, groups, reduction, phi_reduction))


class RelaxedHOGANetwork(nn.Module):
    """A CIFAR ResNet whose every block carries the relaxed HOGA cell (AutoLA Fig. 2, left).

    Args:
        backbone: Backbone name (see :data:`~attnas.models.resnet_cifar.BACKBONES`).
        num_classes: Classifier outputs.
        in_channels: Image channels.
        width: First-stage width.
        groups: ``K``.
        ops: The operation pool (column order of ``alpha``).
        reduction: Reduction ratio of the edges' channel attention.
        phi_reduction: Reduction ratio of the channel attention in phi.

    Shapes:
        - input: an ``(x, y)`` batch with ``x`` of shape ``(B, in_channels, H, W)``, or ``x``
        - output: ``(B, num_classes)`` logits
    """

    def __init__(self, backbone: str = "resnet20", num_classes: int = 10, in_channels: int = 3, width: int = 16,
                 groups: int = 4, ops: Sequence[str] = HOGA_OPS, reduction: int = 4, phi_reduction: int = 16):
        super().__init__()
        self.groups, self.ops = groups, tuple(ops)
        self.alpha = init_alpha(len(hoga_edges(groups)), len(self.ops))

        def make(channels: int) -> RelaxedHOGA:
            return RelaxedHOGA(channels, groups, self.ops, reduction, phi_reduction, alpha=self.alpha)

        self.net = cifar_resnet(backbone, num_classes, in_channels, width, attn_layer=make)

    def forward(self, batch: Any) -> torch.Tensor:
        return self.net(images_of(batch))

    def cells(self) -> list[RelaxedHOGA]:
        """The relaxed cells, input to output."""
        return [m for m in self.modules() if isinstance(m, RelaxedHOGA)]

    def arch_parameters(self) -> list[nn.Parameter]:
        """The architecture weights: ``[alpha]``."""
        return [self.alpha]

    def weight_parameters(self) -> list[nn.Parameter]:
        """Every other parameter (backbone, operations, phi)."""
        return [p for p in self.parameters() if p is not self.alpha]

    def arch_weights(self) -> torch.Tensor:
        """``softmax(alpha)`` per edge (Eq. 13), shape ``(edges, ops)``."""
        return torch.softmax(self.alpha.detach(), dim=-1)
