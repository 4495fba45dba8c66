"""Kernel ``padded_gru``: a GRU over right-padded sequences without packing, with a hand-written backward pass. Pure PyTorch.

The ``gru`` operation of AutoAttend's Table 3 (:class:`attnas.ops.autoattend.text.GRUOp`) must read
only each sentence's own tokens in both directions. Packing (``pack_padded_sequence``)
does that, but on CPU ``nn.GRU`` then records a small autograd graph per time step
(several operations per step and direction), and in its backward pass every step's
slice of the packed input projection zero-fills a gradient as large as the whole
projection (quadratic in the length), which made it a large part of the 24-layer
supernet's backward pass (``benchmarks/speed/bench_autoattend_text.py`` compares the two in
the same run).

This module computes the same function on the right-padded ``[B, L, H]`` batch:

- **Forward direction.** A GRU is causal: its output at a real position ``t < n`` depends
  on tokens ``0..t`` only, so running it over the padded batch gives the exact outputs
  at real positions; what it computes after a sentence ends is discarded.
- **Backward direction.** Each sentence is reversed *within its own length*
  (``t -> n - 1 - t`` for ``t < n``, pads left in place, :func:`reverse_index`), the
  reverse weights are run forward over it, and the result is reversed back. This is
  exactly the packed backward direction, which starts at the sentence's last token.
- **Recurrence** (:class:`GRURecurrence`): the input gates :math:`W_{i\\cdot} x_t +
  b_{i\\cdot}` of every step and direction are one matrix product before the loop (under
  ordinary autograd); the loop runs both directions at once with one batched product
  per step, and its backward pass is written out (below), so no per-step autograd
  graph is recorded. The weight gradients are one product over all steps after the loop.

GRU equations (Cho et al., 2014, in PyTorch's ``nn.GRU`` form and gate order r, z, n):

.. math::
    r_t = \\sigma(g^i_{r,t} + W_{hr} h_{t-1} + b_{hr}),\\quad
    z_t = \\sigma(g^i_{z,t} + W_{hz} h_{t-1} + b_{hz}),\\quad
    n_t = \\tanh(g^i_{n,t} + r_t \\odot (W_{hn} h_{t-1} + b_{hn})),\\quad
    h_t = (1 - z_t) \\odot n_t + z_t \\odot h_{t-1}

Backward, with :math:`\\delta_t = \\partial\\mathcal{L}/\\partial h_t` (output gradient
plus what flows back from step :math:`t+1`), :math:`A_t = (1 - z_t)(1 - n_t^2)` and
:math:`g^h_{n,t} = W_{hn} h_{t-1} + b_{hn}`:

.. math::
    \\frac{\\partial\\mathcal{L}}{\\partial g^h_t} = \\delta_t \\odot
    \\big[A_t\\, g^h_{n,t}\\, r_t(1 - r_t),\\; (h_{t-1} - n_t)\\, z_t (1 - z_t),\\; A_t r_t\\big],
    \\qquad
    \\delta_{t-1} \\mathrel{+}= \\delta_t \\odot z_t + \\frac{\\partial\\mathcal{L}}{\\partial g^h_t} W_{hh}

and :math:`\\partial\\mathcal{L}/\\partial g^i_t` equals :math:`\\partial\\mathcal{L}/\\partial g^h_t`
except in the :math:`n` block, :math:`\\delta_t \\odot A_t`. The factors in brackets do
not depend on :math:`\\delta`, so they are computed for all steps at once; the loop
itself is four operations per step. Outputs equal the packed ``nn.GRU``'s to float
rounding (``tests/kernels/test_padded_gru.py``: outputs and all gradients within 1e-5).

Overrides :meth:`attnas.ops.autoattend.text.GRUOp.recurrence` (hook ``gru_recurrence``) while
gradients are recorded; without them (evaluation) the packed recurrence, which skips finished
sequences, is the faster and runs.
"""

from __future__ import annotations

import torch
from torch import nn

from attnas.ops import overrides
from attnas.ops.autoattend.sequence_context import SequenceContext


def reverse_index(ctx: SequenceContext) -> torch.Tensor:
    """``[L * B]`` long: row permutation of a time-major ``[L * B, C]`` batch that reverses
    every sequence within its length and leaves the pads in place (cached on ``ctx``).

    Row ``t * B + b`` takes row ``(n_b - 1 - t) * B + b`` when ``t < n_b`` and stays
    otherwise; the permutation is its own inverse.
    """
    cached = ctx.__dict__.get("_gru_reverse_index")
    if cached is None:
        B, L = ctx.mask.shape
        t = torch.arange(L, device=ctx.mask.device)[:, None]
        b = torch.arange(B, device=ctx.mask.device)[None, :]
        src = torch.where(ctx.mask.t(), ctx.lengths[None, :] - 1 - t, t)
        cached = (src * B + b).reshape(-1)
        ctx.__dict__["_gru_reverse_index"] = cached
    return cached


class _Involution(torch.autograd.Function):
    """Rows of ``x`` permuted by ``perm``, a permutation that is its own inverse (so is the backward)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(perm)
        return x.index_select(0, perm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (perm,) = ctx.saved_tensors
        return grad.index_select(0, perm), None


def gru_steps(gi: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor, keep: bool) -> tuple:
    """The forward loop of :class:`GRURecurrence`.

    Returns ``hs`` ``[D, L + 1, B, H + 1]`` (:math:`h_0..h_L` and a last column of ones)
    and the per-step hidden gates ``gh`` ``[L, D, B, 3H]``, gates ``rz`` ``[L, D, B, 2H]``
    and candidates ``n`` ``[L, D, B, H]`` that the backward pass needs; without ``keep``
    (inference) one step's buffers are reused instead.
    """
    D, L, B, H3 = gi.shape
    H = H3 // 3
    w_aug = torch.cat((w_hh.transpose(1, 2), b_hh[:, None, :]), dim=1)  # [D, H + 1, 3H]
    hs = gi.new_empty(D, L + 1, B, H + 1)
    hs[:, :, :, H] = 1.0
    hs[:, 0, :, :H] = 0.0
    steps = L if keep else 1
    gh = gi.new_empty(steps, D, B, H3)
    rz = gi.new_empty(steps, D, B, 2 * H)
    n = gi.new_empty(steps, D, B, H)
    # the per-step views, made once (views cost more than the small products of a step)
    gi_rz, gi_n = gi[..., : 2 * H].unbind(1), gi[..., 2 * H :].unbind(1)
    h_in, h_out = hs.unbind(1), hs[..., :H].unbind(1)
    gh_t, gh_rz, gh_n = gh.unbind(0), gh[..., : 2 * H].unbind(0), gh[..., 2 * H :].unbind(0)
    rz_t, r_t, z_t, n_t = rz.unbind(0), rz[..., :H].unbind(0), rz[..., H:].unbind(0), n.unbind(0)
    for t in range(L):
        i = t if keep else 0
        torch.bmm(h_in[t], w_aug, out=gh_t[i])
        torch.add(gi_rz[t], gh_rz[i], out=rz_t[i]).sigmoid_()
        torch.addcmul(gi_n[t], r_t[i], gh_n[i], out=n_t[i]).tanh_()
        torch.lerp(n_t[i], h_out[t], z_t[i], out=h_out[t + 1])
    return hs, (gh, rz, n)


class GRURecurrence(torch.autograd.Function):
    """The GRU recurrence of ``D`` independent directions, given their input gates.

    ``forward(gi, w_hh, b_hh)`` with ``gi`` ``[D, L, B, 3H]`` (input gates
    :math:`W_{ih} x_t + b_{ih}` of every step, gate order r, z, n), ``w_hh`` ``[D, 3H, H]``
    and ``b_hh`` ``[D, 3H]`` returns the hidden states :math:`h_1..h_L` as ``[D, L, B, H]``
    (initial state zero). The backward pass is the hand-written one of the module docstring.

    The backward pass works in place in the saved buffers, so it can run once per
    forward (``retain_graph`` for a second backward raises). The hidden states are
    kept with an extra constant column of ones, so that the hidden
    product of a step and its bias are one batched matrix product (``[h, 1] [W; b]``) and
    the bias gradient comes out of the weight-gradient product.
    """

    @staticmethod
    def forward(ctx, gi: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor) -> torch.Tensor:
        # (autograd runs this under no_grad; needs_input_grad says whether a backward will come)
        training = any(ctx.needs_input_grad)
        hs, saved = gru_steps(gi, w_hh, b_hh, keep=training)
        if training:
            ctx.save_for_backward(w_hh, hs, *saved)
        return hs[:, 1:, :, : w_hh.shape[2]]

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        if getattr(ctx, "used", False):  # the saved buffers are overwritten below
            raise RuntimeError("GRURecurrence: backward through the same graph twice is not supported")
        ctx.used = True
        w_hh, hs, gh, rz, n = ctx.saved_tensors
        L, D, B, H = n.shape
        r, z = rz[..., :H], rz[..., H:]
        # Everything that does not depend on the incoming gradient, for all steps at once
        # and in place in the saved buffers (no step needs them afterwards):
        # dL/dg^h_t = delta_t * k_t per gate block (r, z, n), dL/dg^i_{n,t} = delta_t * a_t.
        k = gh.view(L, D, B, 3, H)
        k_r, k_z, k_n = k[:, :, :, 0], k[:, :, :, 1], k[:, :, :, 2]
        h_prev = hs[:, :-1, :, :H].transpose(0, 1)  # [L, D, B, H]
        torch.mul(torch.sub(h_prev, n), torch.mul(z, 1 - z), out=k_z)
        a = n.mul_(n).neg_().add_(1).mul_(1 - z)  # (1 - z)(1 - n^2), in n's buffer
        torch.mul(a, k_n, out=k_r).mul_(r * (1 - r))  # a g^h_n r (1 - r), from g^h_n in block n
        torch.mul(a, r, out=k_n)
        delta = r  # r is not needed any more: delta_t goes in its place
        grad_out = grad_out.transpose(0, 1)  # [L, D, B, H]
        grad_h = None
        delta_t, out_t, k_t, z_s = delta.unbind(0), grad_out.unbind(0), k.unbind(0), z.unbind(0)
        for t in range(L - 1, -1, -1):
            d = torch.add(out_t[t], grad_h, out=delta_t[t]) if grad_h is not None else delta_t[t].copy_(out_t[t])
            kt = k_t[t].mul_(d[:, :, None, :])  # dL/dg^h_t, in place of k_t
            grad_h = torch.baddbmm(d * z_s[t], kt.view(D, B, 3 * H), w_hh)
        dgh = gh  # [L, D, B, 3H]
        # weight and bias gradients: one product over all steps and sequences, computed
        # transposed ([h, 1]^T dg^h) so that dg^h needs only a block copy to direction-major
        # rows ([L, D, ...] -> [D, L, ...]) instead of a full transpose (2x faster, same bits)
        grad_wb = torch.bmm(hs[:, :-1].reshape(D, L * B, H + 1).transpose(1, 2),
                            dgh.transpose(0, 1).reshape(D, L * B, 3 * H)).transpose(1, 2)  # [D, 3H, H + 1]
        torch.mul(delta, a, out=dgh[..., 2 * H :])  # the n block of dL/dg^i
        return dgh.transpose(0, 1), grad_wb[..., :H], grad_wb[..., H]


def padded_gru(x: torch.Tensor, ctx: SequenceContext, rnn: nn.GRU, sum_directions: bool = False) -> torch.Tensor:
    """Run the one-layer ``rnn`` (``batch_first``) over right-padded ``x`` without packing.

    Equal (to float rounding) to ``pad_packed_sequence(rnn(pack_padded_sequence(x, lengths)))``:
    the forward direction runs over the padded batch, the backward direction over every
    sequence reversed within its length; the output is zero at pad positions.

    Args:
        x: Hidden states (values at pad positions do not matter if finite).
        ctx: Padding of the batch.
        rnn: A one-layer ``nn.GRU`` with ``batch_first=True`` (bias on), uni- or bidirectional.
        sum_directions: Return the sum of the two directions instead of their concatenation
            (bit for bit ``output.view(B, L, 2, H).sum(2)``, without the ``[B, L, 2H]`` tensors).

    Returns:
        The per-position outputs, directions concatenated as ``nn.GRU`` does (or summed).

    Shapes:
        - **x:** :math:`(B, L, H_{in})`
        - **output:** :math:`(B, L, D \\cdot H)` with :math:`D` directions of size :math:`H`
          (:math:`(B, L, H)` with ``sum_directions``)
    """
    B, L, Hin = x.shape
    H = rnn.hidden_size
    names = ["l0"] + (["l0_reverse"] if rnn.bidirectional else [])
    D = len(names)
    w_ih = torch.stack([getattr(rnn, f"weight_ih_{s}") for s in names])  # [D, 3H, Hin]
    b_ih = torch.stack([getattr(rnn, f"bias_ih_{s}") for s in names])
    w_hh = torch.stack([getattr(rnn, f"weight_hh_{s}") for s in names])
    b_hh = torch.stack([getattr(rnn, f"bias_hh_{s}") for s in names])
    x_tm = x.transpose(0, 1).reshape(L * B, Hin)  # time-major rows
    if D == 2:
        perm = reverse_index(ctx)
        xs = torch.stack((x_tm, _Involution.apply(x_tm, perm)))
    else:
        xs = x_tm[None]
    # the input gates of every step and direction: one batched product, [D, L, B, 3H]
    gi = torch.baddbmm(b_ih[:, None, :], xs, w_ih.transpose(1, 2)).view(D, L, B, 3 * H)
    hs = GRURecurrence.apply(gi, w_hh, b_hh)  # [D, L, B, H]
    if D == 2:
        back = _Involution.apply(hs[1].reshape(L * B, H), perm).view(L, B, H)
        # one rounding either way: a + b is the two-term sum of nn.GRU's output
        out = hs[0] + back if sum_directions else torch.cat((hs[0], back), dim=-1)  # [L, B, H or 2H]
    else:
        out = hs[0]
    return ctx.zero_pads(out.transpose(0, 1).contiguous())


def recurrence(module: nn.Module, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
    """Override of :meth:`attnas.ops.autoattend.text.GRUOp.recurrence` (while gradients are recorded)."""
    if not torch.is_grad_enabled():
        return NotImplemented
    return padded_gru(x, ctx, module.rnn, sum_directions=module.directions == "sum")


overrides.register("gru_recurrence", "padded_gru", recurrence)
