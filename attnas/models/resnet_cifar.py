"""CIFAR-style residual networks with an attention hook after each residual block.

The basic-block ResNet-20/32/56 of He et al. (2016, Sec. 4.2): a 3x3 stem, three stages of
``n`` basic blocks with 16, 32 and 64 channels (stride 2 at the start of stages 2 and 3),
global average pooling and a linear classifier; depth = 6n + 2. AutoLA (Ma et al., NeurIPS
2020, Sec. 4.2) searches its HOGA module on ResNet-20 and transfers it to ResNet-32/56.

A bottleneck variant (depth = 9n + 2, 1x1-3x3-1x1 blocks with expansion 4) is provided as a
second, differently shaped backbone for the plug-and-play experiments.

Every block owns an ``attn`` module (``nn.Identity`` unless ``attn_layer`` is given) applied
to the output of the residual branch, just before the shortcut is added -- where SE, CBAM and
AutoLA's released code put their attention modules. ``attn_layer`` is any callable
``channels -> nn.Module`` (an attention class, ``functools.partial`` of one, or a closure that
builds a HOGA cell from an :class:`~attnas.core.arch.Arch`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.models.strided_pointwise import StridedPointwiseConv

AttnFactory = Callable[[int], nn.Module]


def _attn(factory: AttnFactory | None, channels: int) -> nn.Module:
    return nn.Identity() if factory is None else factory(channels)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a shortcut; attention on the branch before the addition.

    Args:
        in_channels: Input channels.
        channels: Output channels.
        stride: Stride of the first convolution (2 halves the resolution).
        attn_layer: Optional factory ``channels -> nn.Module`` for the attention module.

    Shapes:
        - input: ``(B, in_channels, H, W)``
        - output: ``(B, channels, H / stride, W / stride)``
    """

    expansion = 1

    def __init__(self, in_channels: int, channels: int, stride: int = 1, attn_layer: AttnFactory | None = None):
        super().__init__()
        self.out_channels = channels
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.attn = _attn(attn_layer, channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(
                StridedPointwiseConv(in_channels, channels, stride), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.attn(self.bn2(self.conv2(out)))
        return torch.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4) with a shortcut; attention before the addition.

    Args:
        in_channels: Input channels.
        channels: Bottleneck width; the block outputs ``4 * channels``.
        stride: Stride of the 3x3 convolution.
        attn_layer: Optional factory ``channels -> nn.Module`` for the attention module.

    Shapes:
        - input: ``(B, in_channels, H, W)``
        - output: ``(B, 4 * channels, H / stride, W / stride)``
    """

    expansion = 4

    def __init__(self, in_channels: int, channels: int, stride: int = 1, attn_layer: AttnFactory | None = None):
        super().__init__()
        out = channels * self.expansion
        self.out_channels = out
        self.conv1 = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = nn.Conv2d(channels, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.attn = _attn(attn_layer, out)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out:
            self.shortcut = nn.Sequential(StridedPointwiseConv(in_channels, out, stride), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.attn(self.bn3(self.conv3(out)))
        return torch.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """A three-stage CIFAR ResNet (He et al., 2016) with optional attention in every block.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        blocks_per_stage: ``n``: blocks in each of the three stages.
        num_classes: Classifier outputs.
        in_channels: Image channels (3 for CIFAR, 1 for grey-scale images).
        width: Channels of the first stage; the stages use ``width``, ``2 width``, ``4 width``
            (times the block's expansion).
        attn_layer: Optional factory ``channels -> nn.Module`` placed in every block.

    Shapes:
        - input: ``(B, in_channels, H, W)``
        - output: ``(B, num_classes)``
    """

    def __init__(self, block: type[nn.Module], blocks_per_stage: int, num_classes: int = 10, in_channels: int = 3,
                 width: int = 16, attn_layer: AttnFactory | None = None):
        super().__init__()
        if blocks_per_stage < 1 or width < 1 or num_classes < 1 or in_channels < 1:
            raise ConfigError("CifarResNet: blocks_per_stage, width, num_classes and in_channels must be >= 1")
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages, c_in = [], width
        for i, stride in enumerate((1, 2, 2)):
            channels = width * 2**i
            layers = []
            for j in range(blocks_per_stage):
                layers.append(block(c_in, channels, stride if j == 0 else 1, attn_layer))
                c_in = channels * block.expansion
            stages.append(nn.Sequential(*layers))
        self.stage1, self.stage2, self.stage3 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, num_classes)
        self.num_features = c_in
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def blocks(self) -> list[nn.Module]:
        """The residual blocks, input to output."""
        return [b for stage in (self.stage1, self.stage2, self.stage3) for b in stage]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage3(self.stage2(self.stage1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


# depth -> (block, n); ResNet-20/32/56 are the paper's backbones, 29b a bottleneck one.
BACKBONES: dict[str, tuple[type[nn.Module], int]] = {
    "resnet20": (BasicBlock, 3),
    "resnet32": (BasicBlock, 5),
    "resnet56": (BasicBlock, 9),
    "resnet110": (BasicBlock, 18),
    "resnet29b": (Bottleneck, 3),
    "resnet56b": (Bottleneck, 6),
}


def cifar_resnet(name: str, num_classes: int = 10, in_channels: int = 3, width: int = 16,
                 attn_layer: AttnFactory | None = None) -> CifarResNet:
    """Build a named CIFAR ResNet.

    Args:
        name: One of :data:`BACKBONES` (``resnet20``, ``resnet32``, ``resnet56``, ``resnet110``
            with basic blocks; ``resnet29b``, ``resnet56b`` with bottleneck blocks).
        num_classes: Classifier outputs.
        in_channels: Image channels.
        width: First-stage width (16 in the paper's CIFAR-10 experiments, 64 on CIFAR-100).
        attn_layer: Optional attention factory placed in every block.

    Raises:
        ConfigError: For an unknown name (the message lists the valid ones).
    """
    if name not in BACKBONES:
        from attnas.core.errors import unknown_name

        raise ConfigError(unknown_name("backbone", name, BACKBONES))
    block, n = BACKBONES[name]
    return CifarResNet(block, n, num_classes, in_channels, width, attn_layer)
