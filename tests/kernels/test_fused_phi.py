"""The compiled projection phi of the HOGA cell against the PyTorch modules, and its fallback."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import attnas.kernels.fused_phi as kernel_module
from compiled_kernels import eager, fresh_library, loaded_kernel
from attnas.kernels.fused_phi import fused_applies, fused_projection
from attnas.ops.autola.hoga_cell import HOGA, HOGAProjection, aggregate

# (batch, c, K, H, W, reduction): the cell's sizes, a K = 2 cell, odd channel counts (the
# remainder blocks of the matrix products), positions that are not a multiple of the tile
# (256 positions up to 16 channels, 128 up to 32, else 64: the last two shapes span a full and
# a partial tile of the first two widths).
SHAPES = [
    (4, 4, 4, 8, 8, 16),
    (3, 2, 2, 9, 9, 4),
    (2, 3, 2, 5, 7, 2),
    (2, 5, 3, 11, 13, 4),
    (2, 16, 4, 8, 8, 16),
    (1, 1, 4, 3, 3, 16),
    (2, 4, 4, 17, 19, 16),
    (2, 8, 4, 15, 13, 8),
]


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernel (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _phi(c: int, k: int, reduction: int, dtype: torch.dtype, seed: int = 0) -> HOGAProjection:
    torch.manual_seed(seed)
    phi = HOGAProjection((k + 1) * c, k * c, reduction).to(dtype)
    with torch.no_grad():  # batch norms away from their initial identity, so every term counts
        for bn in (phi.bn1, phi.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    return phi


def _nodes(B, c, k, H, W, dtype, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, c, H, W, generator=gen, dtype=dtype).requires_grad_() for _ in range(k)]


def _compare(phi, nodes, tol, channels_last=False):
    """Fused phi against ``phi(aggregate(nodes))`` (the modules, unfolded): outputs, the
    gradients of the nodes and of every parameter, and the running statistics."""
    ref_phi = copy.deepcopy(phi)
    ref_nodes = [n.detach().clone().requires_grad_() for n in nodes]
    assert fused_applies(phi, nodes)
    y = fused_projection(phi, nodes, channels_last)
    ref = ref_phi(aggregate(ref_nodes))
    torch.testing.assert_close(y, ref, rtol=tol, atol=tol)
    assert y.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    gout = torch.randn_like(ref)
    got = torch.autograd.grad(y, [*nodes, *phi.parameters()], gout)
    want = torch.autograd.grad(ref, [*ref_nodes, *ref_phi.parameters()], gout)
    names = [f"node {i}" for i in range(len(nodes))] + [n for n, _ in phi.named_parameters()]
    for name, g, w in zip(names, got, want):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")
    for (name, b), (_, rb) in zip(phi.named_buffers(), ref_phi.named_buffers()):
        torch.testing.assert_close(b, rb, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_fused_phi_equals_the_modules_in_float64(kernel, shape, channels_last):
    B, c, k, H, W, r = shape
    _compare(_phi(c, k, r, torch.float64), _nodes(B, c, k, H, W, torch.float64), 1e-10, channels_last)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels", [16, 64])
def test_fused_phi_in_float32_at_the_cells_sizes(kernel, threads, channels):
    size = {16: 32, 64: 8}[channels]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        c = channels // 4
        _compare(_phi(c, 4, 16, torch.float32), _nodes(8, c, 4, size, size, torch.float32), 2e-4)
    finally:
        torch.set_num_threads(before)


def test_running_statistics_with_cumulative_average_and_repeated_steps(kernel):
    phi = _phi(3, 2, 2, torch.float64)
    for bn in (phi.bn1, phi.bn2):
        bn.momentum = None  # running stats: the average over all batches so far
    ref_phi = copy.deepcopy(phi)
    for seed in range(3):
        nodes = _nodes(2, 3, 2, 5, 6, torch.float64, seed)
        fused_projection(phi, nodes)
        ref_phi(aggregate(nodes))
    for (name, b), (_, rb) in zip(phi.named_buffers(), ref_phi.named_buffers()):
        torch.testing.assert_close(b, rb, rtol=1e-12, atol=1e-12, msg=lambda m, name=name: f"{name}: {m}")
    assert int(phi.bn1.num_batches_tracked) == 3


def test_batch_norms_without_running_statistics(kernel):
    phi = _phi(3, 2, 2, torch.float64)
    phi.bn1 = nn.BatchNorm2d(6, track_running_stats=False).double()  # the kernel gets no running buffers
    _compare(phi, _nodes(2, 3, 2, 5, 6, torch.float64), 1e-10)


def test_running_statistics_of_another_dtype_are_left_to_the_modules(kernel):
    # the kernel writes the running statistics in place as its own dtype: a float32 buffer in a
    # float64 phi goes to the modules, never to the kernel
    phi = _phi(3, 2, 2, torch.float64)
    phi.bn2.running_var = phi.bn2.running_var.float()
    nodes = _nodes(2, 3, 2, 5, 6, torch.float64)
    assert not fused_applies(phi, nodes)
    before = phi.bn2.running_var.clone()
    with pytest.raises(RuntimeError, match="expected scalar type"):  # nn.BatchNorm2d's own error
        phi.project(nodes)
    assert phi.bn2.running_var.dtype == torch.float32 and torch.equal(phi.bn2.running_var, before)


def test_gradcheck(kernel):
    phi = _phi(2, 2, 2, torch.float64)
    nodes = _nodes(2, 2, 2, 3, 4, torch.float64)
    names = [n for n, _ in phi.named_parameters()]

    def f(*tensors):  # phi as a function of the nodes and the parameters
        params = dict(zip(names, tensors[2:]))
        return torch.func.functional_call(phi, params, (list(tensors[:2]),))

    phi.forward = lambda nodes: fused_projection(phi, nodes)
    inputs = [*nodes, *[q.detach().clone().requires_grad_() for q in phi.parameters()]]
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6)


def test_the_cell_uses_it_and_keeps_the_input_memory_format(kernel):
    edges = {"0-0": "identity", "0-1": "se", "1-1": "norm_d1"}
    cell = HOGA(8, edges, groups=2).double()
    ref = copy.deepcopy(cell)
    x = torch.randn(3, 8, 6, 6, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    y = cell(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert type(y.grad_fn).__name__ == "_FusedProjectionBackward"
    torch.testing.assert_close(y, ref.phi(aggregate(_eager_nodes(ref, x))), rtol=1e-10, atol=1e-10)
    assert cell(x.contiguous()).is_contiguous()


def _eager_nodes(cell, x):
    inputs = torch.split(x, cell.group_channels, 1)
    nodes = []
    for k in range(cell.groups):
        nodes.append(sum(cell.ops[f"{j}-{k}"](inputs[k] if j == k else nodes[j]) for j in range(k + 1)))
    return nodes


def test_not_applied_in_evaluation_mode_or_other_dtypes(kernel):
    phi = _phi(2, 2, 2, torch.float64)
    nodes = _nodes(2, 2, 2, 3, 3, torch.float64)
    assert fused_applies(phi, nodes)
    assert not fused_applies(phi, [n.float() for n in nodes])  # nodes and parameters disagree
    assert not fused_applies(copy.deepcopy(phi).bfloat16(), [n.bfloat16() for n in nodes])
    phi.eval()
    assert not fused_applies(phi, nodes)
    y = phi.project(nodes)  # evaluation: running statistics, in PyTorch operations
    torch.testing.assert_close(y, phi(aggregate(nodes)), rtol=1e-10, atol=1e-10)
    assert type(y.grad_fn).__name__ != "_FusedProjectionBackward"


def test_one_value_per_channel_is_left_to_batch_norm(kernel):
    phi = _phi(2, 2, 2, torch.float64)
    nodes = _nodes(1, 2, 2, 1, 1, torch.float64)
    assert not fused_applies(phi, nodes)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        phi.project(nodes)


def test_fallback_without_compiler_gives_the_modules(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("CXX", "attnas-no-such-compiler")
    monkeypatch.delenv("ATTNAS_NO_KERNELS", raising=False)
    phi = _phi(2, 2, 2, torch.float64)
    nodes = _nodes(2, 2, 2, 4, 4, torch.float64)
    assert not fused_applies(phi, nodes)
    ref = copy.deepcopy(phi)(aggregate(nodes))
    torch.testing.assert_close(phi.project(nodes), ref, rtol=1e-10, atol=1e-10)
    assert "compiler" in kernel_module.LIBRARY.unavailable_reason()


def test_fallback_can_be_forced_by_environment(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")
    phi = _phi(2, 2, 2, torch.float64)
    assert not fused_applies(phi, _nodes(2, 2, 2, 4, 4, torch.float64))
    assert "ATTNAS_NO_KERNELS" in kernel_module.LIBRARY.unavailable_reason()


def test_float32_statistics_as_accurate_as_the_modules_far_from_zero(kernel):
    """Nodes with a large common offset: the batch variance must not cancel catastrophically
    (the kernel merges per-tile centred moments); its float32 error against a float64
    reference stays within twice that of the PyTorch modules in float32."""
    phi = _phi(4, 4, 16, torch.float32)
    nodes = [n.detach() + 30 for n in _nodes(8, 4, 4, 16, 16, torch.float32)]
    ref = copy.deepcopy(phi).double()(aggregate([n.double() for n in nodes]))
    fused_err = (fused_projection(copy.deepcopy(phi), nodes).double() - ref).abs().max()
    eager_err = (eager(copy.deepcopy(phi).project, nodes).double() - ref).abs().max()
    assert fused_err <= 2 * eager_err + 1e-6


def test_small_planes_use_the_modules(kernel):
    """Below FUSED_MIN_POSITIONS positions phi runs PyTorch's operations (faster there); the
    kernel itself is still exact on them (the float64 cases above include 3 x 3 planes)."""
    from attnas.kernels.fused_phi import FUSED_MIN_POSITIONS

    phi = _phi(4, 4, 16, torch.float64)
    small = _nodes(4, 4, 4, 2, 2, torch.float64)
    assert 4 < FUSED_MIN_POSITIONS and fused_applies(phi, small)
    assert type(phi.project(small).grad_fn).__name__ != "_FusedProjectionBackward"
    assert type(phi.project(_nodes(4, 4, 4, 4, 4, torch.float64)).grad_fn).__name__ == "_FusedProjectionBackward"


def test_backwards_of_two_sizes_interleaved_share_the_scratch_correctly(kernel):
    """The backward's scratch tensor is reused across calls: a big and a small phi, each
    differentiated twice (retain_graph) in alternation, give the same gradients each time."""
    big, small = _phi(4, 4, 16, torch.float64), _phi(2, 2, 2, torch.float64)
    runs = []
    for phi, nodes in ((big, _nodes(2, 4, 4, 9, 9, torch.float64)), (small, _nodes(2, 2, 2, 3, 4, torch.float64))):
        y = fused_projection(phi, nodes)
        runs.append((y, [*nodes, *phi.parameters()], torch.randn_like(y)))
    first = [torch.autograd.grad(y, leaves, g, retain_graph=True) for y, leaves, g in runs]
    again = [torch.autograd.grad(y, leaves, g) for y, leaves, g in reversed(runs)][::-1]
    for a, b in zip(first, again):
        for ga, gb in zip(a, b):
            assert torch.equal(ga, gb)
