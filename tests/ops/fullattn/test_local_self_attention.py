"""Local multi-head self-attention: the eager definition (SASA Eq. 3) and the layer."""

from __future__ import annotations

import pytest
import torch

from local_attention_inputs import local_attention_inputs

from attnas.core.errors import ConfigError, DataError
from attnas.ops import overrides
from attnas.ops.fullattn.local_self_attention import (
    LocalSelfAttention,
    local_attention,
    relative_embedding_table,
)


def test_out_of_image_neighbours_are_masked():
    # constant values: with masking every output equals the constant, borders included
    # (zero padding would pull border outputs towards zero)
    q, k, _, rr, rc = local_attention_inputs(1, 8, 6, 5, 5, seed=1)
    v = torch.full((1, 8, 6, 5), 3.0, dtype=torch.float64)
    out = local_attention(q, k, v, rr, rc, 4)
    torch.testing.assert_close(out, torch.full_like(out, 3.0))


def test_corner_query_attends_only_to_its_in_image_window():
    # one head, no relative term: the top-left query sees the 2x2 in-image part of its 3x3 window
    q, k, v, _, _ = local_attention_inputs(1, 2, 4, 4, 3, seed=2)
    zeros = torch.zeros(1, 3, dtype=torch.float64)
    out = local_attention(q, k, v, zeros, zeros, heads=1)
    keys = k[0, :, :2, :2].reshape(2, 4)
    vals = v[0, :, :2, :2].reshape(2, 4)
    w = torch.softmax(q[0, :, 0, 0] @ keys, dim=0)
    torch.testing.assert_close(out[0, :, 0, 0], vals @ w)


def test_relative_table_uses_row_offsets_then_column_offsets():
    rr = torch.arange(6.0).view(2, 3)
    rc = -torch.arange(6.0).view(2, 3)
    r = relative_embedding_table(rr, rc)
    assert r.shape == (4, 3, 3)
    assert torch.equal(r[1, 2, 0], rr[1, 2]) and torch.equal(r[3, 0, 1], rc[1, 1])


def test_module_is_the_definition_of_its_projections_and_stride_shape():
    torch.manual_seed(0)
    layer = LocalSelfAttention(6, 16, kernel_size=5, heads=4, stride=2)
    x = torch.randn(2, 6, 7, 9)
    with overrides.eager_only():
        y = layer(x)
    assert y.shape == (2, 16, 4, 5)
    w = layer.qkv.weight
    q = torch.nn.functional.conv2d(x[:, :, ::2, ::2], w[:16])
    k, v = torch.nn.functional.conv2d(x, w[16:]).chunk(2, dim=1)
    torch.testing.assert_close(y, local_attention(q, k, v, layer.rel_row, layer.rel_col, 4, 2), rtol=0, atol=0)


def test_the_kernels_give_the_definition():
    """Whatever override the kernel switch lets run (none, the flat or the compiled kernel)
    computes the eager definition to float rounding."""
    torch.manual_seed(1)
    layer = LocalSelfAttention(6, 16, kernel_size=3, heads=4)
    x = torch.randn(3, 6, 20, 20)
    with overrides.eager_only():
        ref = layer(x)
    torch.testing.assert_close(layer(x), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kernel_size": 4}, "odd"),
        ({"heads": 3}, "divisible by heads=3"),
    ],
)
def test_module_rejects_bad_options(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LocalSelfAttention(4, 16, **kwargs)


def test_bad_input_shapes_are_named():
    with pytest.raises(DataError, match=r"expects \[B, 4, H, W\]"):
        LocalSelfAttention(4, 8)(torch.randn(1, 3, 5, 5))
    q, k, v, rr, rc = local_attention_inputs(1, 8, 5, 5, 3)
    with pytest.raises(DataError, match="rel_row and rel_col"):
        local_attention(q, k, v, rr[:, :2], rc[:, :2], 4)
    with pytest.raises(ConfigError, match="cannot be split into 3 heads"):
        local_attention(q, k, v, rr, rc, 3)


def test_a_process_started_with_no_kernels_runs_the_unfold_definition():
    """With ``ATTNAS_NO_KERNELS=1`` from the start no override is active, so the layer
    computes the eager ``unfold`` form bit for bit (the flat and fused kernels would differ
    in the last float bits)."""
    import os
    import subprocess
    import sys

    code = """
import torch
import attnas.kernels
from attnas.ops import overrides
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention, local_attention
assert not any(overrides.active(h) for h in ("local_attention", "local_self_attention")), overrides.registered()
torch.manual_seed(0)
layer = LocalSelfAttention(4, 8, kernel_size=3, heads=2)
x = torch.randn(2, 4, 9, 11)
q, k, v = layer.project(x)
assert torch.equal(layer(x), local_attention(q, k, v, layer.rel_row, layer.rel_col, 2))
print("unfold")
"""
    env = dict(os.environ, ATTNAS_NO_KERNELS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "unfold"
