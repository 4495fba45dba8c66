"""Parameter and multiply-accumulate counts."""

from __future__ import annotations

import torch
from torch import nn

from attnas.models.complexity import complexity, count_macs, count_parameters
from attnas.models.resnet_cifar import cifar_resnet


def test_macs_of_a_convolution_and_a_linear_layer_by_hand():
    net = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1, bias=False), nn.Flatten(), nn.Linear(5 * 4 * 4, 7))
    x = torch.randn(1, 3, 4, 4)
    assert count_macs(net, x) == 5 * 4 * 4 * 3 * 9 + 80 * 7
    assert count_parameters(net) == 5 * 3 * 9 + 80 * 7 + 7


def test_resnet20_matches_the_papers_flops_column():
    stats = complexity(cifar_resnet("resnet20"), torch.randn(1, 3, 32, 32))
    assert round(stats["gmacs"], 2) == 0.04  # Table 1: "FLOPS(G) 0.04"
    assert round(stats["params_m"], 2) == 0.27


def test_training_mode_is_restored():
    net = cifar_resnet("resnet20", width=4).train()
    count_macs(net, torch.randn(1, 3, 8, 8))
    assert net.training
