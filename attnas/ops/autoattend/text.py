"""Primitive operations for text (AutoAttend, Guan et al., ICML 2021, Table 3, NLP rows).

AutoAttend borrows its NLP operation pool from TextNAS (Wang et al., AAAI 2020):
``zero``, ``identity``, ``conv1``, ``conv3`` (1-D convolutions that keep the length),
``max_pool3`` and ``gru``. Each operation is a unary transform of one connection
(paper Sec. 4.1.1) mapping ``[B, L, H]`` hidden states to ``[B, L, H]``.

Details the paper leaves to its reference implementation (THUMNLab/AutoAttend
``model/ops.py``) and that we follow: an optional pre-LayerNorm on the input of every
parametric operation, ReLU after the convolutions, dropout on the outputs of the
convolutions and of the GRU, and a bidirectional GRU whose two directions are summed.

Padding never leaks into real positions (the reference code lets a LayerNorm'd pad
vector reach the convolution; we do not): convolutions see zeros at pad positions,
max-pooling sees ``-inf`` there, the GRU reads each sequence's own tokens only (in
both directions: :class:`GRUOp`), and every operation
returns zeros at pad positions (the convention of :mod:`attnas.ops.autoattend.sequence_context`).

Every operation has the signature ``Op(dim, **options)`` and ``forward(x, ctx)`` where
``ctx`` is a :class:`~attnas.ops.autoattend.sequence_context.SequenceContext`. They are registered
in the operation pool ``text`` (``attnas.create("op", "conv3", 64, group="text")``).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.overrides import overridable
from attnas.ops.shared.dropout import FastDropout
from attnas.registry import register_op

#: The NLP operation pool of Table 3, in the paper's order.
DEFAULT_TEXT_POOL: tuple[str, ...] = ("zero", "identity", "conv1", "conv3", "max_pool3", "gru")
#: The pool of the Table 6 baseline space: Table 3 plus intra-layer self-attention.
BASELINE_TEXT_POOL: tuple[str, ...] = DEFAULT_TEXT_POOL + ("self_attention",)

GROUP = "text"


def _check_dim(dim: int) -> None:
    if not isinstance(dim, int) or dim < 1:
        raise ConfigError(f"operation dim must be a positive integer, got {dim!r}")


def _pre_norm(dim: int, enabled: bool) -> nn.Module:
    return nn.LayerNorm(dim) if enabled else nn.Identity()


@register_op(GROUP, "zero", in_default_pool=True)
class Zero(nn.Module):
    r"""The zero operation of Table 3: :math:`x \mapsto 0` (the connection is absent).

    Args:
        dim: Hidden size :math:`H` (unused; kept for a uniform signature).

    Shapes:
        - **input:** :math:`(B, L, H)`, context with a :math:`(B, L)` mask
        - **output:** :math:`(B, L, H)`, all zeros
    """

    def __init__(self, dim: int, **_: object):
        super().__init__()
        _check_dim(dim)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        return torch.zeros_like(x)


@register_op(GROUP, "identity", in_default_pool=True)
class Identity(nn.Module):
    r"""The identity operation of Table 3: :math:`x \mapsto x` (pad positions zeroed).

    Args:
        dim: Hidden size :math:`H` (unused; kept for a uniform signature).

    Shapes:
        - **input:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """

    def __init__(self, dim: int, **_: object):
        super().__init__()
        _check_dim(dim)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        return ctx.zero_pads(x)


class MaskedConv1d(nn.Module):
    r"""A length-preserving 1-D convolution over the real tokens of each sequence.

    Table 3 ("1D convolution with kernel size k"), in the TextNAS form of the reference
    implementation: :math:`y = \mathrm{Dropout}(\mathrm{ReLU}(\mathrm{Conv1d}_k(
    \mathrm{LN}(x) \odot m)))\odot m`, where :math:`m` is the padding mask, so a pad
    position contributes exactly zero to its real neighbours (as if the sequence ended
    there) and the output is zero at pad positions. Kernel size 1 is computed as a
    ``Linear`` (the same map, without layout changes).

    Args:
        dim: Hidden size :math:`H` (input and output channels).
        kernel_size: Odd kernel size :math:`k`; padding :math:`(k-1)/2` keeps the length.
        dropout: Dropout on the output.
        pre_norm: LayerNorm on the input (the reference implementation's default).
        activation: ReLU after the convolution.

    Shapes:
        - **input:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """

    def __init__(self, dim: int, kernel_size: int = 3, *, dropout: float = 0.0, pre_norm: bool = True,
                 activation: bool = True):
        super().__init__()
        _check_dim(dim)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"conv kernel_size must be a positive odd integer, got {kernel_size}")
        self.kernel_size = kernel_size
        self.norm = _pre_norm(dim, pre_norm)
        if kernel_size == 1:
            self.conv = nn.Linear(dim, dim)
        else:
            self.conv = nn.Conv1d(dim, dim, kernel_size, padding=(kernel_size - 1) // 2)
        self.activation = activation
        self.dropout = FastDropout(dropout)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        h = self.norm(x)
        if self.kernel_size == 1:
            y = self.conv(h)
        else:
            # zero the pads so they add nothing to their real neighbours; conv1d is much
            # faster on a contiguous [B, H, L] input than on a transposed view
            h = ctx.zero_pads(h).transpose(1, 2).contiguous()
            # back to a contiguous [B, L, H]: later operations (LayerNorm, attention) would
            # otherwise copy it, each of them
            y = self.conv(h).transpose(1, 2).contiguous()
        if self.activation:
            y = F.relu(y)
        return ctx.zero_pads(self.dropout(y))


@register_op(GROUP, "conv1", in_default_pool=True)
class Conv1(MaskedConv1d):
    """``conv 1`` of Table 3: a 1-D convolution with kernel size 1 (see :class:`MaskedConv1d`)."""

    def __init__(self, dim: int, **kwargs: object):
        super().__init__(dim, 1, **kwargs)


@register_op(GROUP, "conv3", in_default_pool=True)
class Conv3(MaskedConv1d):
    """``conv 3`` of Table 3: a 1-D convolution with kernel size 3 (see :class:`MaskedConv1d`)."""

    def __init__(self, dim: int, **kwargs: object):
        super().__init__(dim, 3, **kwargs)


@register_op(GROUP, "max_pool3", in_default_pool=True)
class MaxPool3(nn.Module):
    r"""``max pool 3`` of Table 3: 1-D max pooling, kernel 3, stride 1, same length.

    :math:`y_t = \max(x_{t-1}, x_t, x_{t+1})` over the real tokens only: pad positions
    and the borders are set to the lowest finite value before pooling, so they never win,
    and the output is zero at pad positions.

    Args:
        dim: Hidden size :math:`H`.
        pre_norm: LayerNorm on the input (the reference implementation's default).

    Shapes:
        - **input:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """

    def __init__(self, dim: int, *, pre_norm: bool = True, **_: object):
        super().__init__()
        _check_dim(dim)
        self.norm = _pre_norm(dim, pre_norm)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        # the lowest finite value at pads: never the max next to a real token, and finite
        # where a window holds pads only, so the multiplicative zeroing stays exact
        h = ctx.lowest_at_pads(self.norm(x))
        return ctx.zero_pads(window_max3(h))


@overridable("window_max3")
def window_max3(h: torch.Tensor) -> torch.Tensor:
    """``y_t = max(h_{t-1}, h_t, h_{t+1})`` along dim 1 (borders: the lowest finite value).

    The max of the three shifted views in the ``[B, L, H]`` layout (contiguous output, no
    transposes). The optional kernel ``window_max`` (:mod:`attnas.kernels`) gives it a fused
    backward pass, bit for bit autograd's.
    """
    hp = F.pad(h, (0, 0, 1, 1), value=torch.finfo(h.dtype).min)
    return torch.maximum(torch.maximum(hp[:, :-2], hp[:, 1:-1]), hp[:, 2:])


@register_op(GROUP, "gru", in_default_pool=True)
class GRUOp(nn.Module):
    r"""``GRU`` of Table 3: a gated recurrent unit (Cho et al., 2014) over each sequence.

    Each direction starts and ends at a sequence's own real tokens, so pads never enter
    the recurrence: ``nn.GRU`` runs on packed sequences (``pack_padded_sequence``). As in
    the reference implementation the GRU is bidirectional with hidden size :math:`H`
    per direction and the two directions are summed (``directions="sum"``):

    .. math::
        y_t = \overrightarrow{\mathrm{GRU}}(x_{1..t}) + \overleftarrow{\mathrm{GRU}}(x_{n..t})

    ``"concat"`` uses :math:`H/2` per direction and concatenates them (fewer
    parameters and less work), ``"forward"`` runs the forward direction only.

    Args:
        dim: Hidden size :math:`H`.
        dropout: Dropout on the output.
        pre_norm: LayerNorm on the input (the reference implementation's default).
        directions: ``"sum"``, ``"concat"`` or ``"forward"``.

    Shapes:
        - **input:** :math:`(B, L, H)`, context with lengths :math:`(B,)`
        - **output:** :math:`(B, L, H)`, zero at pad positions
    """

    def __init__(self, dim: int, *, dropout: float = 0.0, pre_norm: bool = True,
                 directions: Literal["sum", "concat", "forward"] = "sum", **_: object):
        super().__init__()
        _check_dim(dim)
        if directions not in ("sum", "concat", "forward"):
            raise ConfigError(f"gru directions must be 'sum', 'concat' or 'forward', got {directions!r}")
        if directions == "concat" and dim % 2:
            raise ConfigError(f"gru directions='concat' needs an even dim, got {dim}")
        self.dim, self.directions = dim, directions
        self.norm = _pre_norm(dim, pre_norm)
        hidden = dim // 2 if directions == "concat" else dim
        self.rnn = nn.GRU(dim, hidden, batch_first=True, bidirectional=directions != "forward")
        self.dropout = FastDropout(dropout)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        return self.dropout(self.recurrence(self.norm(x), ctx))

    def recurrence(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        """The GRU over each sequence's real tokens, directions combined; zeros at pads."""
        B, L, _ = x.shape
        packed = pack_padded_sequence(x, ctx.lengths_cpu, batch_first=True, enforce_sorted=False)
        y = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=L)[0]  # zeros at pads
        return y.view(B, L, 2, self.dim).sum(2) if self.directions == "sum" else y
