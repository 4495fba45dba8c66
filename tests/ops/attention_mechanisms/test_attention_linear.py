"""Linear attention equals its naive O(L^2) formula."""

import torch
import torch.nn.functional as F

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


def test_linear_attention_equals_quadratic_formula(reference):
    torch.manual_seed(0)
    block = build_mechanism("linear", 16, heads=2)
    x, mask = reference.padded_inputs(dim=16)
    q, k, v = reference.block_qkv(block, x)
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    sim = (phi_q @ phi_k.transpose(-1, -2)) * mask[:, None, None, :]  # [B, H, L, L]
    heads = (sim @ v) / (sim.sum(dim=-1, keepdim=True) + block.eps)
    torch.testing.assert_close(block(x, mask), reference.finish(block, heads, mask), atol=1e-5, rtol=1e-4)
