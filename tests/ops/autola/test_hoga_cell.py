"""The discrete HOGA cell: the recurrence of Eq. 2 and the aggregation of Eq. 3."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnas.core.errors import ArchError, ConfigError
from attnas.ops.autola.hoga_cell import HOGA, edge_keys, hoga_edges


def test_edge_count_and_order():
    assert len(hoga_edges(4)) == 10
    assert len(hoga_edges(2)) == 3
    assert edge_keys(3) == ["0-0", "0-1", "1-1", "0-2", "1-2", "2-2"]


def test_recurrence_on_a_hand_computed_case():
    # K = 3, identity/zero edges: U0 = F0, U1 = U0 + F1, U2 = U1 (F2 dropped, U0 -> U2 zero).
    cell = HOGA(6, {"0-0": "identity", "0-1": "identity", "1-1": "identity",
                    "0-2": "zero", "1-2": "identity", "2-2": "zero"}, groups=3)
    cell.phi = nn.Identity()  # look at [U0; U1; U2; U_bar] directly
    x = torch.randn(2, 6, 3, 3)
    f0, f1, f2 = x[:, 0:2], x[:, 2:4], x[:, 4:6]
    u0, u1 = f0, f0 + f1
    u2 = u1
    expected = torch.cat([u0, u1, u2, u0 + u1 + u2], 1)
    torch.testing.assert_close(cell(x), expected)


def test_recurrence_with_attention_ops_matches_eq2():
    torch.manual_seed(0)
    edges = {"0-0": "se", "0-1": "norm_d1", "1-1": "spatial_d2"}
    cell = HOGA(8, edges, groups=2).eval()
    x = torch.randn(2, 8, 5, 5)
    f0, f1 = x[:, :4], x[:, 4:]
    u0 = cell.ops["0-0"](f0)
    u1 = cell.ops["1-1"](f1) + cell.ops["0-1"](u0)
    torch.testing.assert_close(cell(x), cell.phi(torch.cat([u0, u1, u0 + u1], 1)))


def test_output_shape_and_phi_channels():
    cell = HOGA(16, {k: "cbam" for k in edge_keys(4)}, groups=4)
    assert cell(torch.randn(2, 16, 8, 8)).shape == (2, 16, 8, 8)
    assert cell.phi.conv1.in_channels == 20  # (K + 1) C / K


def test_all_zero_cell_still_runs():
    cell = HOGA(8, {k: "zero" for k in edge_keys(2)}, groups=2)
    assert cell(torch.randn(2, 8, 4, 4)).shape == (2, 8, 4, 4)


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="6 channels cannot be split into 4"):
        HOGA(6, {k: "se" for k in edge_keys(4)}, groups=4)
    with pytest.raises(ArchError, match="missing 1-1"):
        HOGA(8, {"0-0": "se", "0-1": "se"}, groups=2)
    with pytest.raises(ArchError, match="unexpected 2-2"):
        HOGA(8, {"0-0": "se", "0-1": "se", "1-1": "se", "2-2": "se"}, groups=2)


def test_folded_phi_equals_phi_of_the_aggregate():
    """phi.project(nodes) folds U_bar's weights into conv1 (Eq. 3): same values and gradients."""
    from attnas.ops.autola.hoga_cell import HOGAProjection, aggregate

    torch.manual_seed(1)
    phi = HOGAProjection(20, 16, reduction=4)
    nodes = [torch.randn(2, 4, 5, 5) for _ in range(4)]
    probe = torch.randn(2, 16, 5, 5)

    def run(fn):
        phi.zero_grad()
        leaves = [n.clone().requires_grad_() for n in nodes]
        out = fn(leaves)
        (out * probe).sum().backward()
        return out, [n.grad for n in leaves], phi.conv1.weight.grad.clone()

    got = run(phi.project)
    ref = run(lambda ns: phi(aggregate(ns)))
    torch.testing.assert_close(got[0], ref[0], atol=1e-5, rtol=1e-4)
    for g, r in zip(got[1], ref[1]):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[2], ref[2], atol=1e-5, rtol=1e-4)
    with pytest.raises(ConfigError, match="phi expects 20 input channels"):
        phi.project(nodes[:3])
