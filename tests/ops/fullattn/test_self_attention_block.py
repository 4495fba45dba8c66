"""Building blocks of Fig. 1(c)/(d) and the Table II candidates."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnas import registry
from attnas.core.errors import ConfigError
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention
from attnas.ops.fullattn.nonlocal_self_attention import NonLocalSelfAttention
from attnas.ops.fullattn.self_attention_block import CANDIDATES, PAPER_LABELS, SelfAttentionBlock, make_candidate


def test_the_seven_table_ii_candidates_are_registered():
    assert registry.names("op", "fullattn") == sorted(CANDIDATES)
    assert len(CANDIDATES) == 7
    assert [PAPER_LABELS[c] for c in CANDIDATES] == [
        "Local SA_k3_h4", "Local SA_k3_h8", "Local SA_k5_h4", "Local SA_k5_h8",
        "Local SA_k7_h4", "Local SA_k7_h8", "Non-local SA",
    ]
    block = registry.get("op", "local_sa_k5_h8", group="fullattn")(16, 16)
    assert isinstance(block.attention, LocalSelfAttention)
    assert (block.attention.kernel_size, block.attention.heads, block.attention.out_channels) == (5, 8, 8)
    assert isinstance(make_candidate("non_local_sa", 16, 16).attention, NonLocalSelfAttention)


@pytest.mark.parametrize("name", CANDIDATES)
@pytest.mark.parametrize("c_in, c_out, stride, size, out_size", [(16, 16, 1, 7, 7), (16, 32, 2, 7, 4), (8, 16, 1, 6, 6)])
def test_block_shapes(name, c_in, c_out, stride, size, out_size):
    block = make_candidate(name, c_in, c_out, stride)
    y = block(torch.randn(2, c_in, size, size))
    assert y.shape == (2, c_out, out_size, out_size)


def test_shortcut_is_identity_only_when_the_shape_is_kept():
    assert isinstance(make_candidate("local_sa_k3_h4", 16, 16, 1).shortcut, nn.Identity)
    projected = make_candidate("local_sa_k3_h4", 16, 32, 2).shortcut
    assert isinstance(projected, nn.Sequential)
    assert isinstance(projected[0], nn.AvgPool2d) and isinstance(projected[1], nn.Conv2d)
    assert projected[1].in_channels == 16 and projected[1].out_channels == 32
    assert isinstance(make_candidate("local_sa_k3_h4", 8, 16, 1).shortcut[1], nn.Conv2d)


def test_block_order_reduce_relu_attention_relu_expand_pool_plus_shortcut():
    torch.manual_seed(0)
    block = make_candidate("local_sa_k3_h4", 16, 32, 2, batch_norm=False)
    x = torch.randn(2, 16, 6, 6)
    h = block.reduce(x).relu()
    h = block.attention(h).relu()
    h = nn.functional.avg_pool2d(block.expand(h), 2)
    skip = block.shortcut[1](nn.functional.avg_pool2d(x, 2))
    torch.testing.assert_close(block(x), h + skip)


def test_batch_norm_follows_each_layer_by_default_and_is_optional():
    plain = make_candidate("non_local_sa", 16, 16, batch_norm=False)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in plain.modules())
    normed = make_candidate("non_local_sa", 16, 32, 2)
    assert sum(isinstance(m, nn.BatchNorm2d) for m in normed.modules()) == 4  # reduce, attention, expand, projection
    assert all(isinstance(m, nn.BatchNorm2d) for m in (normed.reduce_norm, normed.attention_norm, normed.expand_norm))
    assert isinstance(normed.shortcut[2], nn.BatchNorm2d)
    # in eval mode the block is the plain composition with each norm applied after its layer
    normed.eval()
    x = torch.randn(2, 16, 6, 6)
    h = normed.attention_norm(normed.attention(normed.reduce_norm(normed.reduce(x)).relu())).relu()
    h = nn.functional.avg_pool2d(normed.expand_norm(normed.expand(h)), 2)
    torch.testing.assert_close(normed(x), h + normed.shortcut(x))


def test_bad_names_and_widths_are_named():
    with pytest.raises(ConfigError, match="did you mean 'local_sa_k3_h8'"):
        make_candidate("local_sa_k3_h9", 16, 16)
    with pytest.raises(ConfigError, match="divisible by 8 heads"):
        make_candidate("local_sa_k3_h8", 8, 8)  # attention width 4
    with pytest.raises(ConfigError, match="stride must be 1 or 2"):
        SelfAttentionBlock(4, 4, nn.Identity(), 4, stride=3)
