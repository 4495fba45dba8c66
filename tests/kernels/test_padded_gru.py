"""Kernel padded_gru: the GRU without packing (attnas.kernels.padded_gru) against nn.GRU on packed sequences."""

from __future__ import annotations

import contextlib

import pytest
import torch
from compiled_kernels import kernel_enabled, kernels_off
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import attnas.kernels.padded_gru as padded_gru_module

from attnas.kernels.padded_gru import padded_gru, reverse_index
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.autoattend.text import GRUOp

H = 8
LENGTHS = [5, 1, 7, 3, 7]


def batch(lengths, L, seed=0):
    """Random real tokens; pads hold large garbage (they must not matter)."""
    g = torch.Generator().manual_seed(seed)
    ctx = SequenceContext.from_lengths(torch.tensor(lengths), L)
    x = torch.randn(len(lengths), L, H, generator=g)
    return torch.where(ctx.mask[:, :, None], x, torch.full_like(x, 1e3)), ctx


def packed_reference(rnn, x, ctx):
    packed = pack_padded_sequence(x, ctx.lengths_cpu, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])[0]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("hidden", [H, 5])
def test_outputs_and_all_gradients_equal_packed_nn_gru(bidirectional, hidden):
    torch.manual_seed(0)
    rnn = torch.nn.GRU(H, hidden, batch_first=True, bidirectional=bidirectional)
    x, ctx = batch(LENGTHS, 9)
    w = torch.randn(len(LENGTHS), 9, hidden * (2 if bidirectional else 1))  # a loss that weighs every output
    results = []
    for fn in (lambda xx: packed_reference(rnn, xx, ctx), lambda xx: padded_gru(xx, ctx, rnn)):
        rnn.zero_grad()
        xx = x.clone().requires_grad_(True)
        y = fn(xx)
        (y * w).sum().backward()
        results.append((y.detach(), xx.grad, {n: p.grad.clone() for n, p in rnn.named_parameters()}))
    (y_ref, gx_ref, gp_ref), (y, gx, gp) = results
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
    assert torch.all(y[~ctx.mask] == 0)
    torch.testing.assert_close(gx, gx_ref, atol=1e-5, rtol=1e-5)
    assert torch.all(gx[~ctx.mask] == 0)  # garbage pads get no gradient
    for name in gp_ref:
        torch.testing.assert_close(gp[name], gp_ref[name], atol=1e-5, rtol=1e-5, msg=name)


def test_inference_path_equals_training_path():
    torch.manual_seed(1)
    rnn = torch.nn.GRU(H, H, batch_first=True, bidirectional=True)
    x, ctx = batch(LENGTHS, 8, seed=2)
    y_train = padded_gru(x.requires_grad_(True), ctx, rnn)
    with torch.inference_mode():
        y_inf = padded_gru(x.detach(), ctx, rnn)
    torch.testing.assert_close(y_inf, y_train.detach(), atol=0, rtol=0)


def test_no_padding_and_length_one():
    torch.manual_seed(2)
    rnn = torch.nn.GRU(H, H, batch_first=True, bidirectional=True)
    for lengths, L in (([4, 4, 4], 4), ([1], 1), ([1, 1], 3)):
        x, ctx = batch(lengths, L, seed=3)
        with torch.no_grad():
            torch.testing.assert_close(padded_gru(x, ctx, rnn), packed_reference(rnn, x, ctx), atol=1e-5, rtol=1e-5)


def test_reverse_index_reverses_within_lengths_and_is_an_involution():
    ctx = SequenceContext.from_lengths(torch.tensor([3, 1, 2]), 4)
    perm = reverse_index(ctx)
    B, L = 3, 4
    rows = torch.arange(L * B).view(L, B)  # time-major row ids
    moved = rows.reshape(-1)[perm].view(L, B)
    assert moved[:, 0].tolist() == [6, 3, 0, 9]  # sequence 0 (length 3) reversed, its pad in place
    assert moved[:, 1].tolist() == [1, 4, 7, 10]  # length 1: unchanged
    assert moved[:, 2].tolist() == [5, 2, 8, 11]
    assert torch.equal(perm[perm], torch.arange(L * B))


def test_second_backward_through_the_same_graph_raises():
    rnn = torch.nn.GRU(H, H, batch_first=True)
    x, ctx = batch([3, 2], 3)
    y = padded_gru(x, ctx, rnn).sum()
    y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        y.backward()


@pytest.mark.parametrize("directions", ["sum", "concat", "forward"])
def test_gru_op_with_and_without_the_kernel_agree_in_training_mode(directions, monkeypatch):
    """GRUOp: the kernel (padded) and the readable packed recurrence give the same outputs and gradients."""
    kernel_enabled("padded_gru")
    calls = []
    monkeypatch.setattr(padded_gru_module, "padded_gru", lambda *a, **k: calls.append(1) or padded_gru(*a, **k))
    torch.manual_seed(0)
    op = GRUOp(H, directions=directions, dropout=0.0).train()
    x, ctx = batch(LENGTHS, 8, seed=4)
    grads = []
    for off in (True, False):
        op.zero_grad(set_to_none=True)
        xx = x.clone().requires_grad_(True)
        with kernels_off() if off else contextlib.nullcontext():
            y = op(xx, ctx)
        y.pow(2).sum().backward()
        grads.append((y.detach(), xx.grad, [p.grad for p in op.parameters()]))
    assert len(calls) == 1  # the kernel ran once, with kernels on
    torch.testing.assert_close(grads[1][0], grads[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads[1][1], grads[0][1], atol=1e-5, rtol=1e-5)
    for a, b in zip(grads[1][2], grads[0][2]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_summed_directions_equal_the_sum_of_the_concatenation_bit_for_bit():
    torch.manual_seed(0)
    rnn = torch.nn.GRU(H, H, batch_first=True, bidirectional=True)
    x, ctx = batch(LENGTHS, 9)
    g = torch.randn(len(LENGTHS), 9, H)
    results = []
    for summed in (False, True):
        rnn.zero_grad()
        xx = x.clone().requires_grad_(True)
        y = padded_gru(xx, ctx, rnn, sum_directions=summed)
        y = y if summed else y.view(len(LENGTHS), 9, 2, H).sum(2)
        y.backward(g)
        results.append([y.detach(), xx.grad] + [p.grad.clone() for p in rnn.parameters()])
    for a, b in zip(*results):
        assert torch.equal(a, b)
