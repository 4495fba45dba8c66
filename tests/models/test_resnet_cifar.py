"""CIFAR ResNets: sizes as published, shapes, and the attention hook."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.models.complexity import count_parameters
from attnas.models.resnet_cifar import BasicBlock, Bottleneck, cifar_resnet


@pytest.mark.parametrize("name,millions", [("resnet20", 0.27), ("resnet32", 0.46), ("resnet56", 0.85)])
def test_parameter_counts_match_table1(name, millions):
    # AutoLA Table 1 lists 0.27 M, 0.46 M and 0.85 M (projection shortcuts add ~3 K here)
    assert abs(count_parameters(cifar_resnet(name)) / 1e6 - millions) < 0.01


def test_depths_and_shapes():
    for name, n, block in (("resnet20", 3, BasicBlock), ("resnet56", 9, BasicBlock), ("resnet29b", 3, Bottleneck)):
        net = cifar_resnet(name, num_classes=7, in_channels=1, width=8)
        blocks = net.blocks()
        assert len(blocks) == 3 * n and all(isinstance(b, block) for b in blocks)
        assert net(torch.randn(2, 1, 16, 16)).shape == (2, 7)
    assert cifar_resnet("resnet29b", width=8).num_features == 4 * 32


def test_attention_hook_is_in_every_block_and_used():
    calls = []

    class Probe(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.channels = channels

        def forward(self, x):
            calls.append(self.channels)
            assert x.shape[1] == self.channels
            return x * 0.5

    plain = cifar_resnet("resnet20", width=4)
    probed = cifar_resnet("resnet20", width=4, attn_layer=Probe)
    probed.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 8, 8)
    out = probed(x)
    assert calls == [4] * 3 + [8] * 3 + [16] * 3
    assert not torch.allclose(out, plain(x))


def test_unknown_backbone():
    with pytest.raises(ConfigError, match="unknown backbone 'resnet21'"):
        cifar_resnet("resnet21")
