"""Properties every registered attention mechanism must have (shapes, padding, random structure, errors)."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.ops.attention_mechanisms import build_mechanism, mechanism_names
from attention_reference import reference  # noqa: F401  (the fixture)

ALL = mechanism_names()
DIM = 16
# small structural sizes so that blocks, chunks and windows matter at length ~40
SMALL = {
    "local": {"window": 8},
    "longformer": {"window": 8},
    "bigbird": {"block": 4, "random_blocks": 2},
    "sparse": {"stride": 6},
    "reformer": {"bucket_size": 4, "n_buckets": 4},
    "linformer": {"k": 8},
    "performer": {"features": 32},
}


def make(name: str, heads: int = 2, head_dim: int | None = None, max_len: int = 64, **extra):
    torch.manual_seed(0)
    options = {**SMALL.get(name, {}), **extra}
    return build_mechanism(name, DIM, heads=heads, head_dim=head_dim, max_len=max_len, **options)


def test_every_candidate_of_the_paper_is_registered():
    expected = {"softmax", "linear", "performer", "linformer", "reformer", "local", "longformer", "bigbird", "sparse",
                "synthesizer-dense", "synthesizer-random"}
    assert expected <= set(ALL)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("heads,head_dim", [(2, None), (1, 4)])
def test_output_shape_and_finite(name, heads, head_dim, reference):
    block = make(name, heads, head_dim)
    x, mask = reference.padded_inputs(dim=DIM)
    y = block(x, mask)
    assert y.shape == x.shape
    assert torch.isfinite(y).all()
    assert block.heads == heads and block.head_dim == (head_dim or DIM // heads)


@pytest.mark.parametrize("name", ALL)
def test_padding_invariance(name, reference):
    """Appending padding (with arbitrary content) leaves the outputs at real positions unchanged."""
    block = make(name).eval().freeze_random()
    x, mask = reference.padded_inputs(dim=DIM)
    y = block(x, mask)
    extra = 19
    x_long = torch.cat([x, 100 * torch.randn(x.shape[0], extra, DIM)], dim=1)
    x_long[~torch.cat([mask, torch.zeros(x.shape[0], extra, dtype=torch.bool)], 1)] = 7.0  # garbage in padding
    mask_long = torch.cat([mask, torch.zeros(x.shape[0], extra, dtype=torch.bool)], dim=1)
    y_long = block(x_long, mask_long)
    torch.testing.assert_close(y_long[:, : x.shape[1]][mask], y[mask], atol=1e-5, rtol=1e-4)
    assert (y_long[~mask_long] == 0).all()


@pytest.mark.parametrize("name", ALL)
def test_no_mask_means_no_padding(name, reference):
    block = make(name).eval()
    x, _ = reference.padded_inputs(dim=DIM)
    full = torch.ones(x.shape[:2], dtype=torch.bool)
    torch.testing.assert_close(block(x), block(x, full))


@pytest.mark.parametrize("name", ALL)
def test_gradients_reach_every_trainable_parameter(name, reference):
    block = make(name)
    x, mask = reference.padded_inputs(dim=DIM)
    block(x, mask).pow(2).sum().backward()
    for pname, p in block.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname


@pytest.mark.parametrize("name", ALL)
def test_frozen_block_is_deterministic_in_training_mode(name, reference):
    opts = {"redraw_every": 1} if "redraw_every" in type(make(name)).option_names() else {}
    block = make(name, **opts).train().freeze_random()
    x, mask = reference.padded_inputs(dim=DIM)
    torch.testing.assert_close(block(x, mask), block(x, mask), rtol=0, atol=0)


@pytest.mark.parametrize("name", [n for n in ALL if make(n).has_random])
def test_unfrozen_random_structure_is_redrawn(name, reference):
    block = make(name, redraw_every=1).train()
    x, mask = reference.padded_inputs(dim=DIM)
    first = block(x, mask)
    assert not torch.allclose(first, block(x, mask))
    block.eval()  # eval mode never redraws
    torch.testing.assert_close(block(x, mask), block(x, mask), rtol=0, atol=0)
    block.train().freeze_random(False)
    assert not torch.allclose(block(x, mask), block(x, mask))


@pytest.mark.parametrize("name", ALL)
def test_bad_inputs_are_named(name):
    block = make(name)
    with pytest.raises(DataError, match=r"\[batch, length, 16\]"):
        block(torch.randn(2, 5, DIM + 1))
    with pytest.raises(DataError, match="mask must have shape"):
        block(torch.randn(2, 5, DIM), torch.ones(2, 4, dtype=torch.bool))
    if block.length_bound:
        with pytest.raises(ConfigError, match="exceeds max_len 64"):
            block(torch.randn(1, 65, DIM))


def test_unknown_mechanism_and_option_are_named():
    with pytest.raises(ConfigError, match="did you mean 'performer'"):
        build_mechanism("performr", DIM)
    with pytest.raises(ConfigError, match="unknown option 'featurs'.*did you mean 'features'"):
        build_mechanism("performer", DIM, featurs=8)
    with pytest.raises(ConfigError, match="not divisible"):
        build_mechanism("softmax", 10, heads=3)
