"""The attention operations of AutoLA's search space (Ma et al., NeurIPS 2020, Sec. 3.2).

Every operation re-weights its input ``F`` with a gate in ``[0, 1]``: ``A(F) = g(F) * F``
(Eqs. 4-9). Each is an ordinary ``nn.Module`` with the constructor ``(channels, reduction)``,
usable on its own as a plug-in attention module (SE and CBAM are the paper's baselines) and
registered in the operation pool ``"hoga"``:

============== ================================================ ===========
name           operation                                        equation
============== ================================================ ===========
``se``         channel attention (squeeze-and-excitation)       Eq. 4
``channel_v2`` channel attention from average + max pooling     Eq. 5
``spatial_d1`` spatial attention, depth-wise 3x3, dilation 1    Eq. 6
``spatial_d2`` spatial attention, depth-wise 3x3, dilation 2    Eq. 6
``norm_d1``    normalization attention, 3x3, dilation 1         Eq. 7
``norm_d2``    normalization attention, 3x3, dilation 2         Eq. 7
``cbam``       channel attention v2, then spatial attention     Eq. 8
``identity``   ``1 * F``                                        Eq. 9
``zero``       ``0 * F``                                        Eq. 9
============== ================================================ ===========

Details the paper leaves open: the MLPs have no biases (as in the authors' release); the
spatial gate's convolution is followed by a batch normalisation, as in CBAM; CBAM's spatial
branch is the original CBAM's ``7 x 7`` convolution (Figure 3 lists it as kernel 7). The
normalization attention's ``f_n`` is the depth-wise convolution the paper describes (the
authors' release adds a point-wise convolution and a batch normalisation to it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.autola.gate_pooling import mean
from attnas.ops.autola.small_conv import small_conv2d
from attnas.ops.overrides import overridable
from attnas.registry import register_op

POOL = "hoga"


def hidden_size(channels: int, reduction: int) -> int:
    """Width of the channel-attention MLP: ``channels // reduction``, at least 1."""
    if channels < 1 or reduction < 1:
        raise ConfigError(f"channels and reduction must be >= 1, got channels={channels}, reduction={reduction}")
    return max(1, channels // reduction)


def channel_mlp(pooled: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    r"""The channel-attention MLP :math:`f_c(v) = W_2\,\mathrm{ReLU}(W_1 v)` (AutoLA Eqs. 4, 5; no biases).

    Args:
        pooled: Pooled statistics ``v``, ``(S, B, C)`` (``S`` statistics, e.g. the average and
            the maximum); with stacked weights ``(S, B, G, C)``.
        w1: ``W_1``, ``(h, C)``; or one per family ``f`` and group ``g`` of a relaxed cell's
            edges, stacked ``(F, G, h, C)``.
        w2: ``W_2``, ``(C, h)``; stacked ``(F, G, C, h)``.

    Returns:
        ``f_c(v)`` of every statistic: ``(S, B, C)``; with stacked weights ``(S, F, B, G, C)``.
    """
    if w1.dim() == 2:
        return F.linear(torch.relu(F.linear(pooled, w1)), w2)
    hidden = torch.relu(torch.einsum("sbgc,fghc->sfbgh", pooled, w1))
    return torch.einsum("sfbgh,fgch->sfbgc", hidden, w2)


def channel_gate(pooled: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                 max_weight: torch.Tensor | None = None) -> torch.Tensor:
    r"""The channel-attention gate: :math:`\mathcal{S}(f_c(F^c_{avg}))` (Eq. 4, squeeze-and-excitation)
    from the average alone, :math:`\mathcal{S}(f_c(F^c_{avg}) + f_c(F^c_{max}))` (Eq. 5) from both.

    The one implementation of channel attention: the modules :class:`ChannelAttention`,
    :class:`ChannelAttentionV2` (through :class:`ChannelMLPAttention`; and so :class:`CBAM` and
    the HOGA cell's projection) and the relaxed HOGA cell's stacked operations all compute their
    gate here.

    Args:
        pooled: ``[F^c_{avg}]`` ``(1, B, C)`` or ``[F^c_{avg}; F^c_{max}]`` ``(2, B, C)`` (stacked
            weights: ``(1|2, B, G, C)``, see :func:`channel_mlp`).
        w1: ``W_1`` of :func:`channel_mlp`.
        w2: ``W_2`` of :func:`channel_mlp`.
        max_weight: Factor of the max branch, broadcast against ``f_c(F^c_{max})``: 0 where a
            stacked MLP reads the average only (the relaxed cell computes SE with the others).

    Returns:
        The gate: ``(B, C)``; with stacked weights ``(F, B, G, C)``.
    """
    z = channel_mlp(pooled, w1, w2)
    if len(z) == 1:
        return torch.sigmoid(z[0])
    return torch.sigmoid(z[0] + (z[1] if max_weight is None else z[1] * max_weight))


class GatedAttention(nn.Module):
    """An operation ``A(F) = g(F) * F`` of the pool; subclasses define the gate :meth:`gate`."""

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """The gate ``g(x)``, broadcastable to ``x``."""
        raise NotImplementedError

    @overridable("attention_gate")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(x)


class ChannelMLPAttention(GatedAttention):
    r"""Channel attention from pooled statistics through the MLP :math:`f_c` (AutoLA Eqs. 4, 5).

    The part Eq. 4 (:class:`ChannelAttention`) and Eq. 5 (:class:`ChannelAttentionV2`) share:
    the bias-free two-layer MLP ``channels -> channels / reduction -> channels`` (``fc1``,
    ``fc2``) and the gate :func:`channel_gate` of the statistics :meth:`pool` returns.

    Args:
        channels: Input channels ``C``.
        reduction: MLP reduction ratio (hidden width ``max(1, C // reduction)``).

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``
    """

    #: Whether the gate reads the max pooling too (Eq. 5); read by the compiled kernels.
    with_max: bool = False

    def __init__(self, channels: int, reduction: int = 4):
        super().__init__()
        hidden = hidden_size(channels, reduction)
        self.fc1 = nn.Linear(channels, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, channels, bias=False)

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled statistics ``(S, B, C)`` the MLP reads."""
        raise NotImplementedError

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """The gate ``S(sum of f_c over the pooled statistics)`` of shape ``(B, C, 1, 1)``."""
        return channel_gate(self.pool(x), self.fc1.weight, self.fc2.weight)[:, :, None, None]


class ChannelAttention(ChannelMLPAttention):
    r"""Channel attention (squeeze-and-excitation), AutoLA Eq. 4 after Hu et al. (2018).

    .. math::
        A_c(F) = \mathcal{S}\big(f_c(F^c_{avg})\big) \otimes F

    with :math:`F^c_{avg}` the global spatial average, :math:`f_c` a two-layer MLP
    (``channels -> channels / reduction -> channels``, ReLU between) and :math:`\mathcal{S}`
    the sigmoid. Arguments and shapes: :class:`ChannelMLPAttention`.
    """

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """``[F^c_{avg}]``, ``(1, B, C)``."""
        return mean(x, (2, 3))[None]


class ChannelAttentionV2(ChannelMLPAttention):
    r"""Channel attention v2, AutoLA Eq. 5: average and max pooling through one shared MLP.

    .. math::
        A_{c2}(F) = \mathcal{S}\big(f_c(F^c_{avg}) + f_c(F^c_{max})\big) \otimes F

    Arguments and shapes: :class:`ChannelMLPAttention`.
    """

    with_max = True

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """``[F^c_{avg}; F^c_{max}]``, ``(2, B, C)``: one MLP call for both."""
        return torch.stack((mean(x, (2, 3)), x.amax((2, 3))))


def channel_pool(x: torch.Tensor) -> torch.Tensor:
    """``[mean over channels; max over channels]``: ``(B, C, H, W) -> (B, 2, H, W)`` (Eq. 6)."""
    return torch.stack((mean(x, 1), x.amax(1)), 1)


class ConvGateAttention(GatedAttention):
    """An operation whose gate is a ``k x k`` convolution with a dilation (AutoLA Eqs. 6, 7):
    :class:`SpatialAttention` and :class:`NormalizationAttention`.

    Args:
        what: The operation's name in error messages.
        dilation: Dilation of the ``k x k`` convolution.
        kernel_size: ``k`` (odd); the zero padding ``dilation * (k - 1) / 2`` (``self.padding``)
            keeps ``H x W``.

    Subclasses take ``(channels, reduction, dilation, kernel_size)``, ``reduction`` unused
    (accepted so every operation has the same constructor).

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``

    Raises:
        ConfigError: For an even ``k`` or ``dilation < 1``.
    """

    def __init__(self, what: str, dilation: int, kernel_size: int):
        super().__init__()
        if kernel_size % 2 == 0 or kernel_size < 1 or dilation < 1:
            raise ConfigError(f"{what}: kernel_size must be odd and dilation >= 1, "
                              f"got kernel_size={kernel_size}, dilation={dilation}")
        self.dilation, self.kernel_size = dilation, kernel_size
        self.padding = dilation * (kernel_size - 1) // 2


class SpatialAttention(ConvGateAttention):
    r"""Spatial attention, AutoLA Eq. 6.

    .. math::
        A_s(F) = \mathcal{S}\big(f_s([F^s_{avg}; F^s_{max}])\big) \otimes F

    where :math:`F^s_{avg}, F^s_{max}` are the average and the maximum over channels at every
    position and :math:`f_s` maps the two maps to one. AutoLA uses a depth-wise ``3 x 3``
    convolution with dilation 1 or 2; a depth-wise filter on each of the two maps, summed
    into one map, is exactly one ``2 -> 1`` convolution, which is how :math:`f_s` is computed
    (with :func:`~attnas.ops.autola.small_conv.small_conv2d`, the weights of ``self.conv``).
    A batch normalisation follows, as in CBAM's spatial gate (Woo et al., 2018), whose
    ``7 x 7`` convolution is the same layer with ``kernel_size=7``.

    Arguments and shapes: :class:`ConvGateAttention` (the gate does not depend on ``channels``).
    """

    def __init__(self, channels: int, reduction: int = 4, dilation: int = 1, kernel_size: int = 3):
        super().__init__("spatial attention", dilation, kernel_size)
        self.conv = nn.Conv2d(2, 1, kernel_size, padding=self.padding, dilation=dilation, bias=False)
        self.bn = nn.BatchNorm2d(1)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """The gate of shape ``(B, 1, H, W)``."""
        return torch.sigmoid(self.bn(small_conv2d(channel_pool(x), self.conv.weight, None, self.dilation)))


class NormalizationAttention(ConvGateAttention):
    r"""Normalization attention, AutoLA Eq. 7: a per-position, per-channel gate.

    .. math::
        A_n(F) = \mathcal{S}\big(f_n(F)\big) \otimes F

    with :math:`f_n` a depth-wise ``k x k`` convolution (dilation 1 or 2, with a bias), "a
    depth-wise convolutional layer like :math:`f_s`"; the sigmoid normalises it to ``[0, 1]``.
    ``self.conv`` holds the weights; :func:`~attnas.ops.autola.small_conv.small_conv2d` applies them.

    Arguments (``channels``: input channels ``C``) and shapes: :class:`ConvGateAttention`.
    """

    def __init__(self, channels: int, reduction: int = 4, dilation: int = 1, kernel_size: int = 3):
        super().__init__("normalization attention", dilation, kernel_size)
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=self.padding, dilation=dilation,
                              groups=channels)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """The gate of shape ``(B, C, H, W)``."""
        conv = self.conv
        return torch.sigmoid(small_conv2d(x, conv.weight, conv.bias, self.dilation, conv.groups))


class CBAM(GatedAttention):
    r"""Convolutional block attention module, AutoLA Eq. 8 after Woo et al. (2018).

    .. math::
        A_b(F) = A_s\big(A_{c2}(F)\big)

    channel attention v2 (Eq. 5) followed by spatial attention (Eq. 6) with CBAM's full
    ``k x k`` convolution (``k = 7``).

    Args:
        channels: Input channels ``C``.
        reduction: Reduction ratio of the channel MLP.
        kernel_size: Kernel of the spatial convolution.

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``
    """

    def __init__(self, channels: int, reduction: int = 4, kernel_size: int = 7):
        super().__init__()
        self.channel = ChannelAttentionV2(channels, reduction)
        self.spatial = SpatialAttention(channels, reduction, kernel_size=kernel_size)

    @overridable("attention_gate")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.spatial(self.channel(x))


class ConstantAttention(nn.Module):
    r"""A parameter-free operation of AutoLA Eq. 9, :math:`A(F) = \mathbf{k} \otimes F` with a
    constant :math:`\mathbf{k}` (1: :class:`IdentityAttention`, 0: :class:`ZeroAttention`).

    Args:
        channels: Unused (uniform constructor).
        reduction: Unused (uniform constructor).

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``
    """

    def __init__(self, channels: int = 0, reduction: int = 4):
        super().__init__()


class IdentityAttention(ConstantAttention):
    r"""Identity attention, AutoLA Eq. 9 with :math:`\mathbf{k} = 1`: returns its input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class ZeroAttention(ConstantAttention):
    r"""Zero attention, AutoLA Eq. 9 with :math:`\mathbf{k} = \mathbf{0}`: returns zeros.

    A HOGA edge with this operation is absent from the cell.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


# --------------------------------------------------------------------------- the "hoga" pool


#: The paper's pool (Fig. 3), in the column order of the architecture weights: name ->
#: (module, its keyword arguments beyond ``(channels, reduction)``, description).
_POOL_OPS: dict[str, tuple[type[nn.Module], dict, str]] = {
    "se": (ChannelAttention, {}, "Channel attention / squeeze-and-excitation (AutoLA Eq. 4)."),
    "channel_v2": (ChannelAttentionV2, {}, "Channel attention v2: average + max pooling, shared MLP (AutoLA Eq. 5)."),
    "spatial_d1": (SpatialAttention, {"dilation": 1}, "Spatial attention, depth-wise 3x3, dilation 1 (AutoLA Eq. 6)."),
    "spatial_d2": (SpatialAttention, {"dilation": 2}, "Spatial attention, depth-wise 3x3, dilation 2 (AutoLA Eq. 6)."),
    "norm_d1": (NormalizationAttention, {"dilation": 1},
                "Normalization attention, depth-wise 3x3, dilation 1 (AutoLA Eq. 7)."),
    "norm_d2": (NormalizationAttention, {"dilation": 2},
                "Normalization attention, depth-wise 3x3, dilation 2 (AutoLA Eq. 7)."),
    "cbam": (CBAM, {}, "CBAM: channel attention v2 then 7x7 spatial attention (AutoLA Eq. 8)."),
    "identity": (IdentityAttention, {}, "Identity attention, 1 * F (AutoLA Eq. 9)."),
    "zero": (ZeroAttention, {}, "Zero attention, 0 * F (AutoLA Eq. 9)."),
}

#: The paper's pool in a fixed order (the column order of the architecture weights).
HOGA_OPS: tuple[str, ...] = tuple(_POOL_OPS)


def _register(name: str) -> None:
    """Register the factory ``(channels, reduction) -> module`` of ``name`` in the pool ``"hoga"``."""
    module, kwargs, description = _POOL_OPS[name]

    def factory(channels: int, reduction: int = 4) -> nn.Module:
        return module(channels, reduction, **kwargs)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = description
    register_op(POOL, name)(factory)


for _name in HOGA_OPS:
    _register(_name)


def create_attention(name: str, channels: int, reduction: int = 4) -> nn.Module:
    """Build the ``hoga``-pool operation ``name`` (unknown names raise ``ConfigError``)."""
    from attnas.registry import get

    return get("op", name, group=POOL)(channels, reduction)
