"""Stage-wise networks: the Table I macro-architecture and the batch adapter."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ArchError, DataError
from attnas.models.stagewise_network import (
    MixedLayer,
    StagewiseNetwork,
    image_tensor,
    layer_layout,
)
from attnas.ops.fullattn.self_attention_block import CANDIDATES



@pytest.fixture(autouse=True)
def _one_thread():
    """Whole networks run many small blocks: one thread avoids OpenMP hand-offs on a busy machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)

def test_layer_layout_follows_table_i():
    layout = layer_layout(16)
    assert len(layout) == 15
    assert [c_out for _, c_out, _ in layout] == [16] * 3 + [32] * 6 + [64] * 6
    assert [s for _, _, s in layout] == [1, 1, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1]
    assert layout[3][0] == 16 and layout[9][0] == 32


def test_network_stem_is_fixed_local_sa_k3_h8_and_resolution_drops_twice():
    net = StagewiseNetwork(["non_local_sa"] * 15, in_channels=3, num_classes=10)
    assert net.stem.attention.kernel_size == 3 and net.stem.attention.heads == 8
    x = torch.randn(1, 3, 32, 32)
    assert net.features(x).shape == (1, 64, 8, 8)
    assert net(x).shape == (1, 10)
    wide = StagewiseNetwork(["local_sa_k3_h4"] * 15, in_channels=3, num_classes=10, init_channels=32)
    assert wide.features(torch.randn(1, 3, 9, 9)).shape == (1, 128, 3, 3)


def test_mixed_layer_is_the_softmax_weighted_sum_of_the_candidates():
    torch.manual_seed(0)
    layer = MixedLayer(16, 32, 2)
    x = torch.randn(2, 16, 6, 6)
    w = torch.softmax(torch.randn(len(CANDIDATES)), 0)
    expected = sum(wi * op(x) for wi, op in zip(w, layer.candidates))
    torch.testing.assert_close(layer(x, w), expected)


def test_image_tensor_accepts_common_batch_forms():
    x = torch.randn(2, 1, 4, 4)
    assert image_tensor(x) is x
    assert image_tensor((x, torch.zeros(2))) is x
    assert image_tensor({"x": x, "y": 0}) is x
    with pytest.raises(DataError, match="no 'x'"):
        image_tensor({"pixels": x})
    with pytest.raises(DataError, match=r"images \[B, C, H, W\]"):
        image_tensor(torch.randn(2, 4))


def test_wrong_layer_count_and_channels_are_named():
    with pytest.raises(ArchError, match="15 layer operations, got 2"):
        StagewiseNetwork(["non_local_sa"] * 2, 3, 10)
    net = StagewiseNetwork(["non_local_sa"] * 15, 3, 10)
    with pytest.raises(DataError, match=r"\[B, 3, H, W\]"):
        net(torch.randn(1, 1, 8, 8))
