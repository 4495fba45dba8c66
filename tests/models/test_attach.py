"""attach_attention on different backbones: the inserted modules are really used."""

from __future__ import annotations

import random
from functools import partial

import pytest
import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.models.attach import AttentionAfter, attach_attention
from attnas.models.resnet_cifar import cifar_resnet
from attnas.ops.autola.attention_modules import CBAM, ChannelAttention
from attnas.ops.autola.hoga_cell import HOGA
from attnas.spaces.hoga import HOGAConfig, HOGASpace


class UserBlock(nn.Module):
    """A user's residual block without an attention slot."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv(x))


class UserNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Sequential(UserBlock(8), nn.Conv2d(8, 16, 1), UserBlock(16))
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.body(self.stem(x)).mean((2, 3)))


def _count_calls(model, cls):
    calls = []
    for m in model.modules():
        if isinstance(m, cls):
            m.register_forward_hook(lambda mod, i, o: calls.append(type(mod).__name__))
    return calls


@pytest.mark.parametrize("backbone", ["resnet20", "resnet29b"])
def test_hoga_cell_plugs_into_basic_and_bottleneck_resnets(backbone):
    torch.manual_seed(0)
    sp = HOGASpace(HOGAConfig(groups=4))
    arch = sp.sample(random.Random(0))
    model = cifar_resnet(backbone, width=8)
    x = torch.randn(2, 3, 8, 8)
    before = model(x)
    attach_attention(model, sp.attention_factory(arch))
    cells = [m for m in model.modules() if isinstance(m, HOGA)]
    assert len(cells) == len(model.blocks())
    assert all(b.attn.phi.conv2.out_channels == b.out_channels for b in model.blocks())
    calls = _count_calls(model, HOGA)
    after = model(x)
    assert len(calls) == len(cells)
    assert not torch.allclose(before, after)


def test_se_and_cbam_after_a_users_blocks():
    torch.manual_seed(1)
    for factory, cls in ((partial(ChannelAttention, reduction=4), ChannelAttention), (CBAM, CBAM)):
        model = UserNet()
        x = torch.randn(2, 3, 6, 6)
        before = model(x)
        attach_attention(model, factory, block_types=(UserBlock,))
        assert isinstance(model.body[0], AttentionAfter) and isinstance(model.body[2], AttentionAfter)
        assert isinstance(model.body[1], nn.Conv2d)
        calls = _count_calls(model, cls)
        assert not torch.allclose(before, model(x))
        assert len(calls) == 2


def test_channels_can_be_traced_with_an_example():
    model = UserNet()
    seen = []
    attach_attention(model, lambda c: seen.append(c) or nn.Identity(), block_types=("UserBlock",),
                     example_input=torch.randn(1, 3, 4, 4))
    assert seen == [8, 16]


def test_errors():
    with pytest.raises(ConfigError, match="no block of type BasicBlock, Bottleneck in UserNet"):
        attach_attention(UserNet(), ChannelAttention)
    with pytest.raises(ConfigError, match="no 'attn' slot"):
        attach_attention(UserNet(), ChannelAttention, block_types=(UserBlock,), where="branch")
