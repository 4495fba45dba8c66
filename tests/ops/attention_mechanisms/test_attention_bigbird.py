"""BigBird: the block pattern follows the paper, and the block computation equals dense attention over it."""

import math

import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


def test_random_blocks_are_distinct_and_outside_window_and_global():
    torch.manual_seed(0)
    block = build_mechanism("bigbird", 8, heads=1, max_len=96, block=4, global_blocks=2, random_blocks=3)
    mask = torch.zeros(3, 80, dtype=torch.bool)
    for b, n in enumerate((80, 41, 13)):
        mask[b, :n] = True
    idx, ok = block.key_blocks(mask)
    nb = 20
    assert idx.shape == (3, nb, 3 + 2 + 3)
    for b, n in enumerate((80, 41, 13)):
        n_real = math.ceil(n / 4)
        for i in range(nb):
            window = {j for j in (i - 1, i, i + 1) if 0 <= j < nb}
            rand = [int(j) for j, o in zip(idx[b, i, 5:], ok[b, i, 5:]) if o]
            assert len(rand) == len(set(rand))
            assert all(2 <= j < n_real and j not in window for j in rand)
            eligible = len([j for j in range(2, n_real) if j not in window])
            assert len(rand) == min(3, eligible)
            valid = {int(j) for j, o in zip(idx[b, i], ok[b, i]) if o}
            assert window | {0, 1} <= valid  # window and global blocks are always there
            assert sum(bool(o) for o in ok[b, i]) == len(valid)  # no block counted twice


def test_bigbird_equals_dense_attention_over_its_pattern(reference):
    torch.manual_seed(0)
    blk = 4
    block = build_mechanism("bigbird", 16, heads=2, max_len=64, block=blk, global_blocks=1, random_blocks=2)
    x, mask = reference.padded_inputs(dim=16)
    n = x.shape[1]
    q, k, v = reference.block_qkv(block, x)
    idx, ok = block.key_blocks(mask)
    allowed = torch.zeros(x.shape[0], 1, n, n, dtype=torch.bool)
    for b in range(x.shape[0]):
        for i in range(n):
            if i < blk:  # global block: attends everywhere
                allowed[b, 0, i] = True
                continue
            for j, o in zip(idx[b, i // blk], ok[b, i // blk]):
                if o:
                    allowed[b, 0, i, int(j) * blk : int(j) * blk + blk] = True
    allowed &= mask[:, None, None, :]
    expected = reference.finish(block, reference.dense_attention(q, k, v, allowed), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)


def test_random_pattern_is_fixed_by_default_and_redrawn_on_request():
    torch.manual_seed(0)
    block = build_mechanism("bigbird", 8, heads=1, max_len=64, block=4).train()
    before = block.rand_u.clone()
    block(torch.randn(1, 64, 8))
    torch.testing.assert_close(block.rand_u, before)
    block.redraw_every = 1
    block(torch.randn(1, 64, 8))
    assert not torch.equal(block.rand_u, before)
