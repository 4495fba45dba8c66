"""fast_dropout: the splitmix64 mask, compiled and in torch alike, with dropout's distribution."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attnas.kernels.dropout as kernel_module
from compiled_kernels import fresh_library, kernel_enabled, loaded_kernel
from attnas.ops.shared.dropout import FastDropout, dropout_mask, fast_dropout, mask_reference, threshold_of

SEED = 0x0123456789ABCDEF


def splitmix64_top32(seed: int, i: int) -> int:
    """Element ``i``'s hash in plain Python integers (the definition, independent of torch)."""
    m = (1 << 64) - 1
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return (z ^ (z >> 31)) >> 32


@pytest.fixture
def kernel():
    """The compiled mask kernel (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.93])
def test_torch_mask_follows_the_definition(p):
    mask = mask_reference((3, 37), SEED, p, torch.float64)
    keep = [splitmix64_top32(SEED, i) >= threshold_of(p) for i in range(3 * 37)]
    assert mask.flatten().tolist() == [1 / (1 - p) if k else 0.0 for k in keep]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(7,), (3, 5, 4099), (128, 64, 64), (0, 4)])
def test_compiled_mask_equals_torch_mask_at_any_thread_count(kernel, dtype, shape):
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for p in (0.1, 0.5):
                got = dropout_mask(torch.empty(shape, dtype=dtype), p, seed=SEED)
                assert got.dtype == dtype and got.shape == shape
                assert torch.equal(got, mask_reference(shape, SEED, p, dtype))
    finally:
        torch.set_num_threads(before)


def test_without_the_kernel_the_same_mask(monkeypatch):
    x = torch.empty(9, 1000)
    expected = mask_reference(x.shape, SEED, 0.2)
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")
    assert torch.equal(dropout_mask(x, 0.2, seed=SEED), expected)
    assert kernel_module.LIBRARY.load() is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [0.1, 0.3])
def test_half_precision_masks_equal_the_torch_mask(dtype, p):
    x = torch.ones(4, 300, dtype=dtype)
    got = dropout_mask(x, p, seed=SEED)
    assert got.dtype == dtype
    assert torch.equal(got, mask_reference(x.shape, SEED, p, dtype))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_forward_and_backward_apply_the_mask_drawn_from_the_global_seed(p):
    x = torch.randn(6, 7, 5, requires_grad=True)
    g = torch.randn(6, 7, 5)
    torch.manual_seed(3)
    y = fast_dropout(x, p, True)
    (grad,) = torch.autograd.grad(y, x, g)
    torch.manual_seed(3)
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    mask = mask_reference(x.shape, seed, p)
    assert torch.equal(y, x.detach() * mask) and torch.equal(grad, g * mask)
    torch.manual_seed(3)
    assert torch.equal(fast_dropout(x, p, True), y)  # reproducible from torch.manual_seed
    assert not torch.equal(fast_dropout(x, p, True), y)  # and a fresh mask per call


def test_keep_rate_scale_independence_and_eval_identity():
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = fast_dropout(x, 0.1, True)
    values = torch.unique(y)
    assert values.numel() == 2 and values[0] == 0 and values[1].item() == pytest.approx(1 / 0.9)
    keep = (y > 0).double()
    assert abs(keep.mean().item() - 0.9) < 0.003  # 6 standard deviations: 0.0005 each
    # neighbouring elements are independent: P(both kept) ~ 0.81
    assert abs((keep[1:] * keep[:-1]).mean().item() - 0.81) < 0.004
    half = (fast_dropout(x, 0.5, True) > 0).double()
    assert abs(half.mean().item() - 0.5) < 0.005
    assert fast_dropout(x, 0.1, False) is x and fast_dropout(x, 0.0, True) is x
    assert torch.all(fast_dropout(x, 1.0, True) == 0)
    m = FastDropout(0.3).eval()
    assert m(x) is x


def test_the_compiled_call_is_the_operator_attnas_dropout_mask(kernel):
    x = torch.randn(6, 301, dtype=torch.float64, requires_grad=True)
    got = torch.ops.attnas.dropout_mask(x, 0.3, SEED)
    assert torch.equal(got, mask_reference(x.shape, SEED, 0.3, torch.float64))
    assert not got.requires_grad  # a mask: not differentiable
    for dtype in (torch.float32, torch.bfloat16):
        y = torch.empty(3, 17, dtype=dtype)
        assert torch.equal(torch.ops.attnas.dropout_mask(y, 0.1, SEED), mask_reference(y.shape, SEED, 0.1, dtype))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_the_operator_passes_opcheck(kernel, requires_grad):
    x = torch.randn(4, 33, requires_grad=requires_grad)
    results = torch.library.opcheck(torch.ops.attnas.dropout_mask.default, (x, 0.5, SEED))
    assert set(results.values()) == {"SUCCESS"}, results


def test_torch_compile_sees_one_operator_and_the_eager_result(kernel):
    kernel_enabled("dropout")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return gm

    def f(x):
        return torch.relu(x) * dropout_mask(x, 0.3, seed=SEED)

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    x = torch.randn(5, 77)
    assert torch.equal(compiled(x), f(x))
    assert len(graphs) == 1 and "attnas.dropout_mask" in graphs[0]
    assert torch.equal(torch.compile(f, backend="aot_eager", fullgraph=True)(x), f(x))


def test_no_operator_is_defined_under_attnas_no_kernels():
    code = ("import torch, attnas.kernels, attnas.runs.build\n"
            "assert not hasattr(torch.ops.attnas, 'dropout_mask')\n")
    root = str(Path(kernel_module.__file__).resolve().parents[2])
    env = {**os.environ, "ATTNAS_NO_KERNELS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
