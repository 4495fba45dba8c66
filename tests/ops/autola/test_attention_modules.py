"""The attention operations of AutoLA Sec. 3.2 against their equations written out."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas import registry
from attnas.core.errors import ConfigError
from attnas.ops.autola.attention_modules import (
    CBAM, HOGA_OPS, ChannelAttention, ChannelAttentionV2, NormalizationAttention, SpatialAttention,
    channel_gate, create_attention,
)

torch.manual_seed(0)


def test_pool_registers_the_nine_operations():
    assert set(registry.names("op", "hoga")) >= set(HOGA_OPS)
    assert len(HOGA_OPS) == 9


@pytest.mark.parametrize("name", HOGA_OPS)
def test_every_operation_keeps_the_shape(name):
    torch.manual_seed(0)  # independent of test order: a random init can leave SE's 2 hidden ReLUs dead
    x = torch.randn(3, 8, 6, 5)
    op = create_attention(name, 8, reduction=4)
    y = op(x)
    assert y.shape == x.shape
    params = list(op.parameters())
    if params:  # every weight receives a gradient
        y.square().sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


def test_identity_and_zero():
    x = torch.randn(2, 4, 5, 5)
    assert torch.equal(create_attention("identity", 4)(x), x)
    assert torch.equal(create_attention("zero", 4)(x), torch.zeros_like(x))


def _mlp(m, v):
    return F.linear(torch.relu(F.linear(v, m.fc1.weight)), m.fc2.weight)


def test_channel_attention_is_eq4():
    m = ChannelAttention(8, reduction=2)
    x = torch.randn(2, 8, 5, 4)
    gate = torch.sigmoid(_mlp(m, x.mean((2, 3))))
    torch.testing.assert_close(m(x), x * gate[:, :, None, None])
    assert m.fc1.out_features == 4


def test_channel_attention_v2_is_eq5_with_one_shared_mlp():
    m = ChannelAttentionV2(8, reduction=4)
    x = torch.randn(2, 8, 5, 4)
    gate = torch.sigmoid(_mlp(m, x.mean((2, 3))) + _mlp(m, x.amax((2, 3))))
    torch.testing.assert_close(m(x), x * gate[:, :, None, None])


def test_stacked_channel_gates_are_the_modules_gates():
    # the relaxed cell's stacked MLPs (families f, groups g) give every (f, g) the gate of one
    # module with those weights; a zero max weight leaves SE's average branch alone (Eq. 4)
    gen = torch.Generator().manual_seed(3)
    S, B, F_, G, c, h = 2, 3, 2, 3, 8, 2
    pooled = torch.randn(S, B, G, c, generator=gen)
    w1, w2 = torch.randn(F_, G, h, c, generator=gen), torch.randn(F_, G, c, h, generator=gen)
    keep_max = torch.tensor([0.0, 1.0])  # family 0 reads the average only (SE), family 1 both
    stacked = channel_gate(pooled, w1, w2, keep_max[:, None, None, None])
    assert stacked.shape == (F_, B, G, c)
    for f in range(F_):
        for g in range(G):
            single = channel_gate(pooled[: 1 + f, :, g], w1[f, g], w2[f, g])
            torch.testing.assert_close(stacked[f, :, g], single)


@pytest.mark.parametrize("dilation", [1, 2])
def test_spatial_attention_is_eq6(dilation):
    m = SpatialAttention(6, dilation=dilation).eval()
    with torch.no_grad():
        m.bn.running_mean.fill_(0.3)
        m.bn.running_var.fill_(2.0)
    x = torch.randn(2, 6, 7, 7)
    pooled = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
    z = F.conv2d(pooled, m.conv.weight, padding=dilation, dilation=dilation)
    z = (z - 0.3) / torch.sqrt(torch.tensor(2.0) + m.bn.eps) * m.bn.weight + m.bn.bias
    torch.testing.assert_close(m(x), x * torch.sigmoid(z))


@pytest.mark.parametrize("dilation", [1, 2])
def test_normalization_attention_is_eq7_depthwise(dilation):
    m = NormalizationAttention(4, dilation=dilation)
    x = torch.randn(2, 4, 6, 6)
    expected = torch.empty_like(x)
    for c in range(4):  # each channel is filtered on its own (depth-wise)
        z = F.conv2d(x[:, c:c + 1], m.conv.weight[c:c + 1], m.conv.bias[c:c + 1], padding=dilation, dilation=dilation)
        expected[:, c:c + 1] = x[:, c:c + 1] * torch.sigmoid(z)
    torch.testing.assert_close(m(x), expected)


def test_cbam_is_spatial_after_channel_v2():
    m = CBAM(8, reduction=4)
    x = torch.randn(2, 8, 9, 9)
    torch.testing.assert_close(m(x), m.spatial(m.channel(x)))
    assert m.spatial.conv.kernel_size == (7, 7)


def test_gates_are_in_unit_interval():
    x = torch.randn(2, 8, 5, 5) * 10
    for m in (ChannelAttention(8), ChannelAttentionV2(8), SpatialAttention(8), NormalizationAttention(8)):
        g = m.gate(x)
        assert g.min() >= 0 and g.max() <= 1


def test_small_groups_keep_a_hidden_unit():
    assert ChannelAttention(2, reduction=16).fc1.out_features == 1


def test_bad_arguments_are_named():
    with pytest.raises(ConfigError, match="kernel_size"):
        SpatialAttention(4, kernel_size=4)
    with pytest.raises(ConfigError, match="dilation"):
        NormalizationAttention(4, dilation=0)
    with pytest.raises(ConfigError, match="unknown op in pool 'hoga' 'sse'.*did you mean 'se'"):
        create_attention("sse", 4)
