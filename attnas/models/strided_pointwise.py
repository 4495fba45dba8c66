"""A strided ``1 x 1`` convolution computed as the ``1 x 1`` convolution of the subsampled input.

A ``1 x 1`` convolution with stride ``s`` and no padding reads the input only at the positions
``(s i, s j)``: it equals the stride-1 ``1 x 1`` convolution of ``x[:, :, ::s, ::s]``, output
and gradients alike. ResNet's projection shortcut (He et al., 2016, Sec. 3.3, option B) is such
a convolution.

Why not ``nn.Conv2d(c_in, c_out, 1, s)`` itself: on CPUs with AVX2 but without AVX-512, the
oneDNN kernel PyTorch 2.13 uses for the weight gradient of a strided ``1 x 1`` convolution
(``jit_avx2_1x1_convolution_bwd_weights``) writes past the end of its buffer when the input is
channels-last, has 2 to 7 channels and PyTorch runs on one thread: heap corruption, and the
process dies later with SIGSEGV or SIGABRT (measured with valgrind on an AMD EPYC; inputs in
NCHW, with 8 or more channels, or on two threads were not affected). Subsampling first keeps the
convolution at stride 1, where that kernel is not used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class StridedPointwiseConv(nn.Conv2d):
    """``nn.Conv2d(in_channels, out_channels, 1, stride, bias=bias)`` as a stride-1 convolution
    of ``x[:, :, ::stride, ::stride]`` (the same function, the same parameters and state-dict keys).

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        stride: Step between the positions read, in both spatial dimensions.
        bias: Whether to add a learnable bias.

    Shapes:
        - input: ``(B, in_channels, H, W)``
        - output: ``(B, out_channels, ceil(H / stride), ceil(W / stride))``
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1, bias: bool = False):
        super().__init__(in_channels, out_channels, 1, bias=bias)
        self.step = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.step != 1:
            x = x[:, :, :: self.step, :: self.step]
        return F.conv2d(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, step={self.step}"
