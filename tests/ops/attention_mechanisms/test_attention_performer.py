"""Performer: FAVOR+ is the kernel formula, its features are orthogonal, and it approximates softmax attention."""

import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attnas.ops.attention_mechanisms.performer import orthogonal_gaussian, positive_random_features
from attention_reference import reference  # noqa: F401  (the fixture)


def test_orthogonal_features_are_orthogonal_within_a_block():
    torch.manual_seed(0)
    w = orthogonal_gaussian(20, 8)  # blocks of 8, 8, 4 rows
    block = w[:8] / w[:8].norm(dim=1, keepdim=True)
    torch.testing.assert_close(block @ block.T, torch.eye(8), atol=1e-5, rtol=0)
    assert w.shape == (20, 8)


def test_performer_equals_its_kernel_formula(reference):
    torch.manual_seed(0)
    block = build_mechanism("performer", 16, heads=2, features=24).eval()
    x, mask = reference.padded_inputs(dim=16)
    q, k, v = reference.block_qkv(block, x)
    s = block.head_dim**-0.25
    # unstabilised features straight from Lemma 1: exp(w^T x - |x|^2 / 2) / sqrt(m)
    def phi(t):
        return torch.exp(t @ block.omega.T - 0.5 * (t * t).sum(-1, keepdim=True)) / block.features**0.5

    a = (phi(q * s) @ phi(k * s).transpose(-1, -2)) * mask[:, None, None, :]
    heads = (a @ v) / a.sum(-1, keepdim=True)
    torch.testing.assert_close(block(x, mask), reference.finish(block, heads, mask), atol=1e-4, rtol=1e-3)


def _attention_matrix_error(features: int, trials: int, q, k) -> float:
    """Mean relative Frobenius error of the FAVOR+ attention matrix against softmax's."""
    d = q.shape[-1]
    exact = torch.softmax(q @ k.transpose(-1, -2) / d**0.5, dim=-1)
    errs = []
    for t in range(trials):
        omega = orthogonal_gaussian(features, d, generator=torch.Generator().manual_seed(1000 + t))
        qf = positive_random_features(q * d**-0.25, omega, is_query=True, eps=0.0)
        kf = positive_random_features(k * d**-0.25, omega, is_query=False, eps=0.0)
        approx = qf @ kf.transpose(-1, -2)
        approx = approx / approx.sum(-1, keepdim=True)
        errs.append(((approx - exact).norm() / exact.norm()).item())
    return sum(errs) / len(errs)


def test_performer_approximates_softmax_better_with_more_features():
    g = torch.Generator().manual_seed(0)
    q, k = (0.5 * torch.randn(2, 2, 24, 8, generator=g) for _ in range(2))
    errors = [_attention_matrix_error(m, 6, q, k) for m in (4, 32, 512)]
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.12, errors


def test_positive_random_features_are_unbiased():
    """Lemma 1: E[phi(q)^T phi(k)] = exp(q^T k); averaged over draws the kernel estimate converges."""
    g = torch.Generator().manual_seed(0)
    q, k = (0.25 * torch.randn(1, 1, 6, 8, generator=g) for _ in range(2))
    exact = torch.exp(q @ k.transpose(-1, -2))
    est = torch.zeros_like(exact)
    draws = 400
    for t in range(draws):
        omega = orthogonal_gaussian(16, 8, generator=torch.Generator().manual_seed(t))
        # no stabilisers: the raw estimator of Lemma 1
        phi = lambda x: torch.exp(x @ omega.T - 0.5 * (x * x).sum(-1, keepdim=True)) / 16**0.5  # noqa: E731
        est += phi(q) @ phi(k).transpose(-1, -2) / draws
    assert ((est - exact).abs() / exact).max() < 0.1
