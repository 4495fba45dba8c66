"""Helpers of the block-sparse computation."""

import torch

from attnas.ops.attention_mechanisms.blocked import (
    blocked_attention,
    drop_duplicate_blocks,
    last_real_position,
    pad_length,
)

from attention_reference import reference  # noqa: F401  (the fixture)


def test_duplicates_are_dropped_after_their_first_valid_occurrence():
    idx = torch.tensor([[3, 1, 3, 1, 2]])
    ok = torch.tensor([[False, True, True, True, True]])
    assert drop_duplicate_blocks(idx, ok).tolist() == [[False, True, True, False, True]]


def test_last_real_position_and_padding():
    mask = torch.tensor([[True, True, False, False], [True, False, True, False], [False] * 4])
    assert last_real_position(mask).tolist() == [2, 3, 0]
    assert pad_length(torch.ones(2, 3), 5, 1).tolist() == [[1, 1, 1, 0, 0]] * 2
    assert pad_length(mask, 6, 1, False).shape == (3, 6)


def test_all_blocks_everywhere_is_full_attention(reference):
    """Every query block gathering every key block reproduces full softmax attention."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 11, 4, generator=g) for _ in range(3))
    mask = torch.tensor([[True] * 11, [True] * 7 + [False] * 4])
    nb = 3  # blocks of 4
    idx = torch.arange(nb).expand(1, nb, nb)
    out = blocked_attention(q, k, v, mask, 4, idx, torch.ones(1, nb, nb, dtype=torch.bool), 0.5)
    expected = reference.dense_attention(q, k, v, mask[:, None, None, :].expand(-1, 1, 11, -1), 0.5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
