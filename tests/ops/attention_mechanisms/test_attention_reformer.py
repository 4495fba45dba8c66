"""Reformer LSH attention equals a dense reference of the paper's equations; hashing behaves as specified."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


def dense_reformer(block, x, mask):
    """Eq. 3-6 of Kitaev et al. with dense L x L matrices and Python loops (no sorting of tensors)."""
    qk = block.split_heads(block.qk(x))
    v = block.split_heads(block.v(x))
    keys = F.normalize(qk, dim=-1)
    bsz, heads, n, _ = qk.shape
    rounds, c = block.n_hashes, block.bucket_size
    out = torch.zeros_like(qk)
    for b in range(bsz):
        real = [i for i in range(n) if mask[b, i]]
        for h in range(heads):
            buckets = []
            for r in range(rounds):
                rot = keys[b, h] @ block.rotations[h, r]
                buckets.append(torch.cat([rot, -rot], -1).argmax(-1).tolist())
            outs, lses = [], []
            for r in range(rounds):
                order = sorted(real, key=lambda i: (buckets[r][i], i))  # padding sorts after every real token
                chunk = {i: rank // c for rank, i in enumerate(order)}
                scores = torch.full((n, n), -float("inf"))
                for i in real:
                    for j in real:
                        if buckets[r][i] == buckets[r][j] and chunk[j] in (chunk[i], chunk[i] - 1):
                            shared = sum(buckets[s][i] == buckets[s][j] for s in range(rounds))
                            scores[i, j] = qk[b, h, i] @ keys[b, h, j] / math.sqrt(block.head_dim) - math.log(shared)
                    scores[i, i] = -1e5
                lse = torch.logsumexp(scores, -1)
                outs.append(torch.softmax(scores, -1).nan_to_num(0.0) @ v[b, h])
                lses.append(lse)
            w = torch.softmax(torch.stack(lses), 0).nan_to_num(0.0)  # [R, L]
            out[b, h] = sum(w[r][:, None] * outs[r] for r in range(rounds))
    return out


@pytest.mark.parametrize("n_hashes", [1, 3])
def test_reformer_equals_dense_reference(n_hashes, reference):
    torch.manual_seed(0)
    block = build_mechanism("reformer", 16, heads=2, n_hashes=n_hashes, n_buckets=4, bucket_size=4).eval()
    x, mask = reference.padded_inputs(dim=16)
    expected = reference.finish(block, dense_reformer(block, x, mask), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)


def test_hash_is_angular_and_padding_gets_the_extra_bucket():
    torch.manual_seed(0)
    block = build_mechanism("reformer", 8, heads=1, n_buckets=6, bucket_size=4)
    keys = F.normalize(torch.randn(2, 1, 10, 8), dim=-1)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    buckets = block.hash(keys, mask)
    assert buckets.shape == (2, 1, 2, 10)
    assert (buckets[mask[:, None, None, :].expand_as(buckets)] < 6).all()
    assert (buckets[1, :, :, 7:] == 6).all()
    torch.testing.assert_close(block.hash(3.0 * keys, mask), buckets)  # h(x) depends on the direction only


def test_default_bucket_count_follows_max_len_over_chunk():
    assert build_mechanism("reformer", 8, heads=1, max_len=1000, bucket_size=50).n_buckets == 20
