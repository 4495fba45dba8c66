"""The relaxed HOGA cell (Eq. 13) against the mixed operation written out."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.ops.autola.attention_modules import HOGA_OPS
from attnas.ops.autola.hoga_cell import aggregate, edge_key, edge_keys
from attnas.ops.autola.hoga_relaxed import GroupedMixedOp, MixedOp, RelaxedHOGA, init_alpha


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
                                 ("cbam", "spatial_d1", "spatial_d2", "channel_v2"), ("norm_d2", "spatial_d1"),
                                 ("identity", "spatial_d1")])
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


def _stacked_and_reference_params(grouped: GroupedMixedOp, g: int, name: str, module: torch.nn.Module):
    """Pairs (slice of a stacked parameter's gradient, the exported module's parameter) of one edge's op."""
    c = grouped.channels
    pairs = []
    if name in grouped.families:
        f = grouped.families.index(name)
        mlp = module.channel if name == "cbam" else module
        pairs += [(grouped.mlp1.grad[f, g], mlp.fc1.weight), (grouped.mlp2.grad[f, g], mlp.fc2.weight)]
    if name == "cbam":
        pairs += [(grouped.cbam_conv.grad[g: g + 1], module.spatial.conv.weight),
                  (grouped.cbam_bn_weight.grad[g: g + 1], module.spatial.bn.weight),
                  (grouped.cbam_bn_bias.grad[g: g + 1], module.spatial.bn.bias)]
    if name.startswith("spatial"):
        pairs += [(getattr(grouped, f"{name}_conv").grad[g: g + 1], module.conv.weight),
                  (getattr(grouped, f"{name}_bn_weight").grad[g: g + 1], module.bn.weight),
                  (getattr(grouped, f"{name}_bn_bias").grad[g: g + 1], module.bn.bias)]
    if name.startswith("norm"):
        part = slice(g * c, (g + 1) * c)
        pairs += [(getattr(grouped, f"{name}_weight").grad[part], module.conv.weight),
                  (getattr(grouped, f"{name}_bias").grad[part], module.conv.bias)]
    return pairs


@pytest.mark.parametrize("shared_input", [False, True])
def test_grouped_mixed_op_gradients_equal_mixed_ops(shared_input):
    """Gradients w.r.t. the input, the mixing weights and every stacked parameter equal those of
    one plain MixedOp per edge (the channels-last fused path against Eq. 13 written out)."""
    torch.manual_seed(6)
    G, c = 3, 4
    grouped = GroupedMixedOp(G, c, HOGA_OPS, shared_input=shared_input)
    refs = [[grouped.export(g, o) for o in HOGA_OPS] for g in range(G)]
    x = torch.randn(2, c if shared_input else G * c, 8, 8)
    w = torch.softmax(torch.randn(G, len(HOGA_OPS)), -1)
    probe = torch.randn(2, G * c, 8, 8)

    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    (grouped(xg, wg) * probe).sum().backward()

    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    outs = [MixedOp(c, refs[g])(xr if shared_input else xr[:, g * c: (g + 1) * c], wr[g]) for g in range(G)]
    (torch.cat(outs, 1) * probe).sum().backward()

    tol = dict(atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(xg.grad, xr.grad, **tol)
    torch.testing.assert_close(wg.grad, wr.grad, **tol)
    checked = 0
    for g in range(G):
        for name, module in zip(HOGA_OPS, refs[g]):
            for got, ref in _stacked_and_reference_params(grouped, g, name, module):
                torch.testing.assert_close(got, ref.grad, **tol)
                checked += 1
    assert checked == sum(len(list(m.parameters())) for ms in refs for m in ms)  # every parameter compared


def test_relaxed_cell_gradients_equal_reference():
    """The whole relaxed cell (fan-out grouping, folded phi) against Eqs. 2, 3, 13 written out:
    gradients w.r.t. the input and alpha."""
    torch.manual_seed(7)
    cell = RelaxedHOGA(16, groups=4)
    with torch.no_grad():
        cell.alpha.normal_()
    x = torch.randn(2, 16, 6, 6)
    probe = torch.randn(2, 16, 6, 6)
    xg = x.clone().requires_grad_()
    (cell(xg) * probe).sum().backward()
    got_x, got_alpha = xg.grad, cell.alpha.grad.clone()
    cell.alpha.grad = None
    xr = x.clone().requires_grad_()
    (reference_forward(cell, xr) * probe).sum().backward()
    torch.testing.assert_close(got_x, xr.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got_alpha, cell.alpha.grad, atol=1e-5, rtol=1e-4)
