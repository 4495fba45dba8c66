"""Non-local self-attention against a naive softmax reference."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import DataError
from attnas.ops.fullattn.nonlocal_self_attention import NonLocalSelfAttention, nonlocal_attention


def _naive(theta, phi, g):
    B, C, H, W = theta.shape
    logits = torch.einsum("bci,bcj->bij", theta.flatten(2), phi.flatten(2))  # no 1/sqrt(d) (Wang et al.)
    return torch.einsum("bij,bcj->bci", logits.softmax(-1), g.flatten(2)).reshape(B, g.shape[1], H, W)


def test_matches_naive_softmax_attention_with_gradients():
    gen = torch.Generator().manual_seed(0)
    theta, phi = (torch.randn(2, 6, 5, 3, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(2))
    g = torch.randn(2, 4, 5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    out, ref = nonlocal_attention(theta, phi, g), _naive(theta, phi, g)
    torch.testing.assert_close(out, ref)
    grads = torch.autograd.grad(out.sum(), (theta, phi, g))
    grads_ref = torch.autograd.grad(ref.sum(), (theta, phi, g))
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b)


def test_module_projects_and_attends_globally():
    torch.manual_seed(0)
    m = NonLocalSelfAttention(3, 8)
    x = torch.randn(2, 3, 4, 6)
    y = m(x)
    assert y.shape == (2, 8, 4, 6)
    theta, phi, g = m.qkv(x).chunk(3, 1)
    torch.testing.assert_close(y, _naive(theta, phi, g), rtol=1e-5, atol=1e-5)
    # global: changing one far-away pixel changes every output position
    x2 = x.clone()
    x2[:, :, -1, -1] += 5.0
    assert (m(x2) - y)[:, :, 0, 0].abs().max() > 0


def test_bad_shapes_are_named():
    with pytest.raises(DataError, match=r"expects \[B, 3, H, W\]"):
        NonLocalSelfAttention(3, 8)(torch.randn(1, 2, 4, 4))
    with pytest.raises(DataError, match="theta and phi"):
        nonlocal_attention(torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 3))
