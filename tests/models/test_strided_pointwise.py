"""StridedPointwiseConv: the strided 1x1 convolution as the 1x1 convolution of the subsampled input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from attnas.models.resnet_cifar import BasicBlock, Bottleneck
from attnas.models.strided_pointwise import StridedPointwiseConv


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_equals_the_strided_convolution(stride, bias, channels_last):
    torch.manual_seed(0)
    ours = StridedPointwiseConv(5, 7, stride, bias=bias)
    ref = nn.Conv2d(5, 7, 1, stride, bias=bias)
    ref.load_state_dict(ours.state_dict())  # the same parameters under the same keys
    x = torch.randn(3, 5, 9, 8, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    ours, ref = ours.double(), ref.double()
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), ref(xb)
    assert ya.shape == yb.shape == (3, 7, -(-9 // stride), -(-8 // stride))
    torch.testing.assert_close(ya, yb)
    g = torch.randn_like(yb)
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(xa.grad, xb.grad)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    if bias:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad)


@pytest.mark.parametrize("block, out", [(BasicBlock, 8), (Bottleneck, 32)])
def test_resnet_projection_shortcuts_use_it_under_the_same_keys(block, out):
    b = block(4, 8, stride=2)
    assert isinstance(b.shortcut[0], StridedPointwiseConv) and b.shortcut[0].step == 2
    assert "shortcut.0.weight" in b.state_dict() and b.state_dict()["shortcut.0.weight"].shape == (out, 4, 1, 1)
    assert b(torch.randn(2, 4, 8, 8)).shape == (2, out, 4, 4)


def test_channels_last_shortcut_on_one_thread_keeps_the_heap_intact():
    """The case that corrupted the heap through nn.Conv2d(4, 8, 1, 2) on AVX2 CPUs (see the
    module's docstring): a fresh process, glibc's heap checks on, 300 training steps."""
    script = textwrap.dedent("""
        import torch
        from attnas.models.resnet_cifar import BasicBlock
        torch.set_num_threads(1)
        torch.manual_seed(0)
        for _ in range(300):
            block = BasicBlock(4, 8, stride=2)
            x = torch.randn(20, 4, 8, 8).contiguous(memory_format=torch.channels_last).requires_grad_()
            block(x).sum().backward()
        print("done")
    """)
    env = {**os.environ, "MALLOC_CHECK_": "3"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr[-2000:]
