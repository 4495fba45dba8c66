"""The plug-in attention baseline space: validation, the distribution, the networks it builds."""

from __future__ import annotations

import random

import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ArchError, ConfigError
from attnas.ops.autola.attention_modules import CBAM, ChannelAttention, ChannelAttentionV2
from attnas.spaces.resnet_attention import ResNetAttentionConfig, ResNetAttentionSpace
from attnas.tasks.base import TaskInfo


class _Task:
    info = TaskInfo(kind="image", in_dim=1, num_classes=4)


def space(**kw) -> ResNetAttentionSpace:
    return ResNetAttentionSpace(ResNetAttentionConfig(**kw))


def test_registered_without_search_capabilities():
    assert registry.get("space", "resnet-attention") is ResNetAttentionSpace
    assert ResNetAttentionSpace.capabilities == frozenset()


def test_distribution_covers_the_modules():
    s = space()
    rng = random.Random(0)
    assert {s.sample(rng).choices["attention"] for _ in range(50)} == {"none", "se", "cbam"}
    a = s.arch({"attention": "se"})
    assert all(s.mutate(a, rng).choices["attention"] != "se" for _ in range(10))
    assert s.size() == 3
    with pytest.raises(ArchError, match="single module"):
        space(modules=("se",)).mutate(space(modules=("se",)).arch({"attention": "se"}), rng)


@pytest.mark.parametrize("choices, message", [
    ({"attention": "sse"}, "'sse' is not one of this space's modules .did you mean 'se'"),
    ({"attention": "channel_v2"}, "'channel_v2' is not one of this space's modules"),
    ({}, "missing key 'attention'"),
    ({"attention": "se", "where": "after"}, "unknown key 'where'"),
])
def test_bad_choices_are_named(choices, message):
    with pytest.raises(ArchError, match=message):
        space().validate(space().arch(choices))


def test_bad_options_are_named():
    with pytest.raises(ConfigError, match="modules: unknown module 'sqe'"):
        from_mapping(ResNetAttentionConfig, {"modules": ["none", "sqe"]}, "space")
    with pytest.raises(ConfigError, match="reduction: must be >= 1"):
        ResNetAttentionConfig(reduction=0)


def test_builds_the_backbone_with_the_module_in_every_block():
    s = space(modules=("none", "se", "cbam", "channel_v2"), width=8, reduction=4)
    x = torch.randn(2, 1, 8, 8)
    expect = {"none": torch.nn.Identity, "se": ChannelAttention, "cbam": CBAM, "channel_v2": ChannelAttentionV2}
    params = {}
    for name, cls in expect.items():
        model = s.build(s.arch({"attention": name}), _Task())
        assert all(type(b.attn) is cls for b in model.net.blocks()), name
        assert model((x, None)).shape == (2, 4)
        params[name] = sum(p.numel() for p in model.parameters())
    assert params["none"] < params["se"] == params["channel_v2"] < params["cbam"]  # v2 shares its MLP (Eq. 5)
    # SE on 8 channels with reduction 4: 8 -> 2 -> 8, no biases
    se = s.build(s.arch({"attention": "se"}), _Task()).net.blocks()[0].attn
    assert se.fc1.weight.shape == (2, 8)
    assert "se in every block" in s.describe(s.arch({"attention": "se"}))
