"""Kernel edge_logits (PyTorch): the fused edge-MLP function equals the plain autograd expression, gradients included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas.graphvae.step_products import edge_logits
from attnas.kernels import edge_logits as module


def _inputs(edges=150, width=12, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(9, width, dtype=dtype, generator=gen, requires_grad=True)
    dst = torch.randn(13, width, dtype=dtype, generator=gen, requires_grad=True)
    src_idx = torch.randint(0, 9, (edges,), generator=gen)
    dst_idx = torch.randint(0, 13, (edges,), generator=gen)
    w = torch.randn(1, width, dtype=dtype, generator=gen, requires_grad=True)
    b = torch.randn(1, dtype=dtype, generator=gen, requires_grad=True)
    return src, dst, src_idx, dst_idx, w, b


def _plain(src, dst, src_idx, dst_idx, w, b):
    return F.linear(torch.relu(src[src_idx] + dst[dst_idx]), w, b).squeeze(-1)


@pytest.mark.parametrize("edges", [1, 128, 300])  # one block, exactly one block, several blocks with a remainder
def test_values_and_gradients_equal_the_plain_expression(edges):
    src, dst, src_idx, dst_idx, w, b = _inputs(edges)
    params = [src, dst, w, b]
    out = edge_logits(src, dst, src_idx, dst_idx, w, b)
    ref = _plain(src, dst, src_idx, dst_idx, w, b)
    assert out.shape == (edges,)
    assert torch.allclose(out, ref, atol=1e-12)
    up = torch.randn(edges, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad((out * up).sum(), params)
    want = torch.autograd.grad((ref * up).sum(), params)
    for name, g, r in zip(("src", "dst", "w", "b"), got, want):
        assert g.shape == r.shape, name
        assert torch.allclose(g, r, atol=1e-12), name


def test_repeated_rows_accumulate_and_dead_units_get_no_gradient():
    src, dst, _, _, w, b = _inputs()
    with torch.no_grad():
        src[0, :6] = -100.0  # ReLU inactive for these units on every edge from row 0
    src_idx = torch.zeros(5, dtype=torch.long)
    dst_idx = torch.tensor([0, 0, 1, 1, 1])
    out = edge_logits(src, dst, src_idx, dst_idx, w, b)
    g_src, g_dst = torch.autograd.grad(out.sum(), [src, dst])
    assert torch.all(g_src[0, :6] == 0) and torch.all(g_dst[:2, :6] == 0)
    assert torch.all(g_src[1:] == 0) and torch.all(g_dst[2:] == 0)  # rows no edge uses
    ref_src, ref_dst = torch.autograd.grad(_plain(src, dst, src_idx, dst_idx, w, b).sum(), [src, dst])
    assert torch.allclose(g_src, ref_src, atol=1e-12) and torch.allclose(g_dst, ref_dst, atol=1e-12)


def test_only_requested_gradients_and_no_grad():
    src, dst, src_idx, dst_idx, w, b = _inputs()
    (g_dst,) = torch.autograd.grad(edge_logits(src.detach(), dst, src_idx, dst_idx, w.detach(), b.detach()).sum(), [dst])
    ref = torch.autograd.grad(_plain(src, dst, src_idx, dst_idx, w, b).sum(), [dst])[0]
    assert torch.allclose(g_dst, ref, atol=1e-12)
    with torch.no_grad():
        assert torch.allclose(edge_logits(src, dst, src_idx, dst_idx, w, b), _plain(src, dst, src_idx, dst_idx, w, b),
                              atol=1e-12)


def test_falls_back_to_the_plain_expression_under_bf16_autocast(monkeypatch):
    src, dst, src_idx, dst_idx, w, b = _inputs(dtype=torch.float32)

    def fail(*args):
        raise AssertionError("the fused function ran under autocast")

    monkeypatch.setattr(module._EdgeLogits, "apply", fail)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = edge_logits(src, dst, src_idx, dst_idx, w, b)
    assert out.dtype == torch.bfloat16
    ref = _plain(src, dst, src_idx, dst_idx, w, b)
    assert torch.allclose(out.float(), ref, rtol=0.05, atol=0.05 * float(ref.detach().abs().max()))
