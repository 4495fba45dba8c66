"""Dense and random Synthesizers equal their formulas (Tay et al. 2021, Eq. 1-4)."""

import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


def test_dense_synthesizer_equals_formula(reference):
    torch.manual_seed(0)
    block = build_mechanism("synthesizer-dense", 16, heads=2, max_len=50)
    x, mask = reference.padded_inputs(dim=16)
    n = x.shape[1]
    heads = []
    for h in range(2):
        hid = torch.relu(block.f1(x))[..., 8 * h : 8 * h + 8]  # [B, L, d_h]
        logits = hid @ block.w2[h, :, :n] + block.b2[h, :n]
        logits = logits.masked_fill(~mask[:, None, :], float("-inf"))
        heads.append(torch.softmax(logits, -1) @ block.v(x)[..., 8 * h : 8 * h + 8])
    expected = reference.finish(block, torch.stack(heads, 1), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)


def test_random_synthesizer_equals_formula_and_ignores_token_content(reference):
    torch.manual_seed(0)
    block = build_mechanism("synthesizer-random", 16, heads=2, max_len=50)
    x, mask = reference.padded_inputs(dim=16)
    n = x.shape[1]
    logits = block.R[None, :, :n, :n].masked_fill(~mask[:, None, None, :], float("-inf"))
    heads = torch.softmax(logits, -1) @ block.split_heads(block.v(x))
    torch.testing.assert_close(block(x, mask), reference.finish(block, heads, mask), atol=1e-5, rtol=1e-4)
    assert isinstance(block.R, torch.nn.Parameter)


def test_fixed_random_synthesizer_keeps_r_out_of_the_parameters():
    block = build_mechanism("synthesizer-random", 8, heads=1, max_len=12, trainable=False)
    assert "R" not in dict(block.named_parameters()) and "R" in dict(block.named_buffers())
