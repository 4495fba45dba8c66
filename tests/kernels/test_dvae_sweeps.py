"""Kernel dvae_sweeps (PyTorch): both encoder sweeps with stacked weights against two sweeps."""

from __future__ import annotations

import torch
from compiled_kernels import kernel_enabled, kernels_off

from attnas.graphvae.dvae_encoder import DVAEEncoder
from attnas.ops import overrides


def _chains(b: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random DAGs that each contain the chain 0 -> 1 -> ... -> n-1 (both sweeps in index order)."""
    g = torch.Generator().manual_seed(seed)
    adj = torch.triu(torch.rand(b, n, n, generator=g) < 0.3, 1)
    idx = torch.arange(n - 1)
    adj[:, idx, idx + 1] = True
    return adj, torch.full((b,), n)


def test_stacked_directions_equal_two_sweeps_with_gradients():
    kernel_enabled("dvae_sweeps")
    assert overrides.active("dvae_sweeps")
    torch.manual_seed(0)
    enc = DVAEEncoder(x_dim=5, hidden=7, latent=3, max_nodes=6).double()
    adj, n_nodes = _chains(5, 6, seed=2)
    x = torch.randn(5, 6, 5, dtype=torch.float64)
    out = {}
    for off in (False, True):
        enc.zero_grad(set_to_none=True)
        if off:
            with kernels_off():
                mu, logvar = enc(x, adj, n_nodes)
        else:
            mu, logvar = enc(x, adj, n_nodes)
        (mu.pow(2).sum() + logvar.sum()).backward()
        out[off] = (mu.detach(), logvar.detach(), {k: p.grad.clone() for k, p in enc.named_parameters()})
    torch.testing.assert_close(out[False][0], out[True][0], rtol=0, atol=1e-12)
    torch.testing.assert_close(out[False][1], out[True][1], rtol=0, atol=1e-12)
    for name, g in out[True][2].items():
        torch.testing.assert_close(out[False][2][name], g, rtol=0, atol=1e-12, msg=name)


def test_other_dags_take_the_two_sweeps():
    from attnas.kernels.dvae_sweeps import sweeps

    enc = DVAEEncoder(x_dim=5, hidden=7, latent=3, max_nodes=6)
    adj = torch.zeros(2, 6, 6)
    adj[:, 0, 2] = adj[:, 1, 2] = 1.0  # vertices 0 and 1 share a level: not index order
    x = torch.randn(2, 6, 5)
    assert sweeps(enc, x, torch.zeros(2, 6, 6), adj, torch.full((2,), 6)) is NotImplemented
