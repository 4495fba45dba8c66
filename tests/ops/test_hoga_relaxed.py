"""The relaxed HOGA cell (Eq. 13) against the mixed operation written out."""

from __future__ import annotations

import pytest
import torch

from attnas.errors import ConfigError
from attnas.ops.hoga_cell import aggregate, edge_key, edge_keys
from attnas.ops.hoga_relaxed import GroupedMixedOp, MixedOp, RelaxedHOGA, init_alpha
from attnas.ops.vision_attention import HOGA_OPS


def reference_forward(cell: RelaxedHOGA, x: torch.Tensor) -> torch.Tensor:
    """Eqs. 2, 3 and 13 written out: one MixedOp per edge built from the cell's own weights."""
    w = torch.softmax(cell.alpha, -1)
    c = cell.group_channels
    inputs = torch.split(x, c, 1)
    nodes = []
    for k in range(cell.groups):
        u = 0
        for j in range(k + 1):
            mixed = MixedOp(c, [cell.export_op(j, k, o) for o in cell.ops]).train(cell.training)
            u = u + mixed(inputs[k] if j == k else nodes[j], w[cell.edges.index((j, k))])
        nodes.append(u)
    return cell.phi(aggregate(nodes))


@pytest.mark.parametrize("training", [True, False])
def test_fused_cell_equals_reference(training):
    torch.manual_seed(0)
    cell = RelaxedHOGA(16, groups=4)
    with torch.no_grad():
        cell.alpha.normal_()
        for name, buf in cell.named_buffers():  # non-trivial running statistics for eval mode
            if name.endswith("_mean"):
                buf.uniform_(-0.5, 0.5)
            elif name.endswith("_var"):
                buf.uniform_(0.5, 2.0)
    cell.train(training)
    x = torch.randn(3, 16, 7, 7)
    torch.testing.assert_close(cell(x), reference_forward(cell, x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("ops", [("se", "zero"), ("spatial_d2",), ("norm_d1", "norm_d2", "identity"),
                                 ("cbam", "spatial_d1", "spatial_d2", "channel_v2")])
def test_grouped_mixed_op_equals_mixed_op_for_any_pool(ops):
    torch.manual_seed(1)
    grouped = GroupedMixedOp(3, 4, ops)
    x = torch.randn(2, 12, 6, 6)
    w = torch.softmax(torch.randn(3, len(ops)), -1)
    out = grouped(x, w)
    for g in range(3):
        ref = MixedOp(4, [grouped.export(g, o) for o in ops])(x[:, 4 * g: 4 * g + 4], w[g])
        torch.testing.assert_close(out[:, 4 * g: 4 * g + 4], ref, atol=1e-5, rtol=1e-4)


def test_one_hot_alpha_gives_the_discrete_cell():
    torch.manual_seed(2)
    cell = RelaxedHOGA(8, groups=2)
    choice = {"0-0": "cbam", "0-1": "norm_d2", "1-1": "spatial_d1"}
    with torch.no_grad():
        cell.alpha.fill_(-1e4)
        for i, (j, k) in enumerate(cell.edges):
            cell.alpha[i, cell.ops.index(choice[edge_key(j, k)])] = 1e4
    discrete = cell.discretize(choice)
    x = torch.randn(4, 8, 6, 6)
    torch.testing.assert_close(cell(x), discrete(x), atol=1e-5, rtol=1e-4)


def test_channels_last_input_gives_the_same_result():
    torch.manual_seed(3)
    cell = RelaxedHOGA(16, groups=4)
    x = torch.randn(2, 16, 6, 6)
    torch.testing.assert_close(cell(x.to(memory_format=torch.channels_last)), cell(x), atol=1e-5, rtol=1e-4)


def test_alpha_init_and_gradient():
    torch.manual_seed(4)
    alpha = init_alpha(10, 9)
    assert alpha.shape == (10, 9) and 0 < alpha.abs().max() < 0.01
    cell = RelaxedHOGA(8, groups=4, alpha=alpha)
    assert cell.alpha is alpha
    cell(torch.randn(2, 8, 4, 4)).square().sum().backward()
    assert alpha.grad is not None and alpha.grad.abs().sum() > 0
    assert alpha.grad[:, HOGA_OPS.index("zero")].abs().sum() > 0  # through the softmax only


def test_shared_alpha_shape_is_checked():
    with pytest.raises(ConfigError, match="alpha has shape"):
        RelaxedHOGA(8, groups=2, alpha=init_alpha(10, 9))


def test_edge_keys_match_rows():
    cell = RelaxedHOGA(9, groups=3)
    assert [edge_key(j, k) for j, k in cell.edges] == edge_keys(3)
    assert cell.alpha.shape == (6, 9)


def test_edges_sharing_one_input_equal_mixed_ops():
    torch.manual_seed(5)
    fan = GroupedMixedOp(3, 4, HOGA_OPS, shared_input=True)
    u = torch.randn(2, 4, 6, 6)
    w = torch.softmax(torch.randn(3, len(HOGA_OPS)), -1)
    out = fan(u, w)
    assert out.shape == (2, 12, 6, 6)
    for g in range(3):
        ref = MixedOp(4, [fan.export(g, o) for o in HOGA_OPS])(u, w[g])
        torch.testing.assert_close(out[:, 4 * g: 4 * g + 4], ref, atol=1e-5, rtol=1e-4)


def test_unknown_pool_operation():
    with pytest.raises(ConfigError, match="unknown relaxed HOGA operation 'sse'"):
        GroupedMixedOp(2, 4, ("se", "sse"))
