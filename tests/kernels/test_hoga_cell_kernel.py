"""The discrete HOGA cell as one autograd operation against its module-by-module path."""

from __future__ import annotations

import copy

import pytest
import torch

import attnas.kernels.attention_gates as gates_kernel
import attnas.kernels.fused_phi as phi_kernel
from attnas.ops import hoga_cell
from attnas.ops.hoga_cell import HOGA, edge_keys
from attnas.kernels.fused_phi import FUSED_MIN_POSITIONS
from attnas.kernels.hoga_cell import fused_cell_kernels
from attnas.spaces.hoga import FIGURE3_EDGES
from compiled_kernels import disable_kernel, loaded_kernel, torch_threads, eager, kernel_off, kernels_off

CELLS = {
    "figure3": (FIGURE3_EDGES, 4),
    "every gate": ({"0-0": "se", "0-1": "channel_v2", "1-1": "spatial_d2", "0-2": "norm_d2", "1-2": "cbam",
                    "2-2": "spatial_d1"}, 3),
    "identities and zeros": ({"0-0": "zero", "0-1": "identity", "1-1": "identity", "0-2": "identity",
                              "1-2": "identity", "2-2": "zero"}, 3),
    "one gate after identities": ({"0-0": "identity", "0-1": "identity", "1-1": "norm_d1"}, 2),
    "all zero": ({k: "zero" for k in edge_keys(2)}, 2),
}


@pytest.fixture(scope="module")
def kernels():
    """The gate and phi kernels (skipped without a compiler)."""
    return loaded_kernel(gates_kernel), loaded_kernel(phi_kernel)


def _cell(edges, groups, channels, dtype, seed=0):
    """A cell with every parameter moved off its initial value."""
    torch.manual_seed(seed)
    cell = HOGA(channels, edges, groups, reduction=2, phi_reduction=2).to(dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in cell.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return cell


def _module_by_module(monkeypatch, cell, x):
    """``cell(x)`` on the path the fused cell replaces."""
    with monkeypatch.context() as m:
        kernel_off(m, "hoga_cell")
        return cell(x)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", list(CELLS))
def test_equals_the_module_by_module_cell_in_float64(kernels, monkeypatch, name, channels_last):
    edges, groups = CELLS[name]
    C = 4 * groups
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    cell = _cell(edges, groups, C, torch.float64)
    ref = copy.deepcopy(cell)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, C, 6, 5, generator=gen, dtype=torch.float64).contiguous(memory_format=fmt).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    assert fused_cell_kernels(cell, x, FUSED_MIN_POSITIONS) is not None
    for _ in range(2):  # twice: the running statistics move on from the first call's
        y, y_ref = cell(x), _module_by_module(monkeypatch, ref, x_ref)
        assert type(y.grad_fn).__name__ == "_FusedCellBackward"
        assert y.is_contiguous(memory_format=fmt)
        torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
        dy = torch.randn(y.shape, generator=gen, dtype=torch.float64)
        got = torch.autograd.grad(y, [x, *cell.parameters()], dy, allow_unused=True, materialize_grads=True)
        want = torch.autograd.grad(y_ref, [x_ref, *ref.parameters()], dy, allow_unused=True, materialize_grads=True)
        for (pname, _), g, w in zip([("x", None), *cell.named_parameters()], got, want):
            torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10, msg=lambda m: f"{pname}: {m}")
        assert got[0].is_contiguous(memory_format=fmt)
        for (bname, b), r in zip(cell.named_buffers(), ref.buffers()):
            torch.testing.assert_close(b, r, rtol=1e-10, atol=1e-10, msg=lambda m: f"{bname}: {m}")


@pytest.mark.parametrize("threads", [1, 2])
def test_float32_at_the_first_resnet_stage(kernels, monkeypatch, threads):
    cell = _cell(FIGURE3_EDGES, 4, 16, torch.float32)
    ref = copy.deepcopy(cell)
    x = torch.randn(8, 16, 32, 32).contiguous(memory_format=torch.channels_last).requires_grad_()
    with torch_threads(threads):
        y, y_ref = cell(x), _module_by_module(monkeypatch, ref, x)
        torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
        dy = torch.randn(y.shape)
        for g, w in zip(torch.autograd.grad(y, [x, *cell.parameters()], dy),
                        torch.autograd.grad(y_ref, [x, *ref.parameters()], dy)):
            torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-3)


def test_parameter_gradients_without_an_input_gradient(kernels, monkeypatch):
    cell = _cell(FIGURE3_EDGES, 4, 8, torch.float64)
    ref = copy.deepcopy(cell)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)  # no gradient wanted for x
    got = torch.autograd.grad(cell(x).square().sum(), list(cell.parameters()))
    want = torch.autograd.grad(_module_by_module(monkeypatch, ref, x).square().sum(), list(ref.parameters()))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


def test_where_it_does_not_apply_the_cell_runs_module_by_module(kernels, monkeypatch):
    cell = _cell(FIGURE3_EDGES, 4, 8, torch.float64)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)
    assert fused_cell_kernels(cell, x, 16) is not None
    assert fused_cell_kernels(cell, x, 26) is None  # too small a plane for the compiled phi
    assert fused_cell_kernels(cell, x[:, :, :, :4].transpose(2, 3), 16) is None  # neither NCHW nor channels-last
    assert fused_cell_kernels(cell, x.to(torch.bfloat16), 16) is None
    assert fused_cell_kernels(cell.eval(), x, 16) is None  # evaluation: phi's batch norms use running statistics
    assert type(cell(x).grad_fn).__name__ != "_FusedCellBackward"
    cell.train()
    disable_kernel(monkeypatch, gates_kernel, "ATTNAS_NO_KERNELS")
    assert fused_cell_kernels(cell, x, 16) is None
    y = cell(x.requires_grad_())
    assert type(y.grad_fn).__name__ != "_FusedCellBackward"
    y.sum().backward()  # the PyTorch expressions still train the cell


def test_double_backward_raises_instead_of_being_wrong(kernels):
    cell = _cell(FIGURE3_EDGES, 4, 8, torch.float64)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(cell(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_a_resnet_with_the_cell_trains_through_it_with_the_same_gradients(kernels, monkeypatch):
    from attnas.models.hoga_networks import hoga_network

    torch.manual_seed(0)
    net = hoga_network("resnet20", FIGURE3_EDGES, groups=4).double().to(memory_format=torch.channels_last)
    ref = copy.deepcopy(net)
    x = torch.randn(4, 3, 12, 12, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    y = torch.tensor([0, 1, 2, 3])
    loss = torch.nn.functional.cross_entropy(net(x), y)
    nodes, seen = [loss.grad_fn], set()
    while nodes:  # fused cells on the 12 x 12 and 6 x 6 planes; the 3 x 3 ones run module by module
        node = nodes.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nodes.extend(n for n, _ in node.next_functions)
    assert sum(type(n).__name__ == "_FusedCellBackward" for n in seen) == 6
    ref_loss = torch.nn.functional.cross_entropy(_module_by_module(monkeypatch, ref, x), y)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-10, atol=1e-10)
    got = torch.autograd.grad(loss, list(net.parameters()))
    for g, w in zip(got, torch.autograd.grad(ref_loss, list(ref.parameters()))):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


def test_an_edge_without_its_kernel_sends_the_cell_module_by_module_counting_each_batch_once(kernels):
    cell = _cell(FIGURE3_EDGES, 4, 8, torch.float64)
    cell.ops["3-3"].conv.float()  # one edge whose kernel cannot run (parameters of another dtype)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)
    assert fused_cell_kernels(cell, x, 16) is None
    bns = [cell.ops["1-1"].bn, cell.ops["2-3"].bn, cell.ops["2-2"].spatial.bn]  # spatial attentions' and CBAM's
    assert [int(bn.num_batches_tracked) for bn in bns] == [0, 0, 0]  # building the other kernels counted nothing
    cell.ops["3-3"].conv.double()
    kernels = fused_cell_kernels(cell, x, 16)
    assert kernels is not None and [int(bn.num_batches_tracked) for bn in bns] == [0, 0, 0]
    cell(x)  # builds its own kernels again; each batch norm sees the batch once
    assert [int(bn.num_batches_tracked) for bn in bns] == [1, 1, 1]


def test_hooks_on_an_edge_or_on_every_module_see_every_edge(kernels):
    cell = _cell(FIGURE3_EDGES, 4, 8, torch.float64)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)
    seen = []
    handle = cell.ops["1-3"].register_forward_hook(lambda m, args, out: seen.append(out.shape))
    y = cell(x)
    assert seen == [(2, 2, 5, 5)] and type(y.grad_fn).__name__ != "_FusedCellBackward"  # module by module
    handle.remove()
    assert type(cell(x).grad_fn).__name__ == "_FusedCellBackward"
    with torch.nn.modules.module.register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__)):
        assert type(cell(x).grad_fn).__name__ != "_FusedCellBackward"
    assert "NormalizationAttention" in seen
