"""The building blocks of the full-attention search space and its seven candidates.

Zhou et al., *Full-attention based Neural Architecture Search using Context
Auto-regression* (2021), Sec. III.A, Fig. 1(c) (non-local block) and Fig. 1(d)
(local block), candidates of Table II. A block is a "bottleneck" in the sense of He et
al. (2016):

    x -> 1x1 reduce -> ReLU -> attention -> ReLU -> 1x1 expand [-> AvgPool if stride 2] -> (+) -> y
    x --------------------------- shortcut ------------------------------------------------^

"The first linear layer transforms the input features and reduces their channel
dimensionality [...]. The final linear layer expands the features to match the output's
dimensionality. If the stride of the layer is set to two, there is an average pooling
operation after the final linear layer [...]. The ReLU activation functions follow the
first linear layer and the attention operation. [...] the shortcut connections simply
perform identity mapping." (Sec. III.A). The shortcut is the identity when the shape is
unchanged; when the stride or the channel count changes it is projected (average
pooling with the same window, then a bias-free 1x1 convolution), since an identity
cannot be added to a tensor of another shape.

Normalisation: the text lists the layers of a block without naming a normalisation, but
it describes the block as "inspired by the 'bottleneck' building block design [29]"
(He et al.'s ResNet bottleneck, which follows every convolution with BatchNorm), and
Fig. 1(c)/(d) is not available as text. By default (``batch_norm=True``) a BatchNorm
follows each 1x1 layer, the attention and the shortcut projection, in the ResNet
places. Without it the network barely trains: at initialisation its logits hardly vary
between images (the 1x1 biases dominate after global pooling), and a 16-block network
built from ``Local SA_k3_h4`` stayed at chance on sklearn's digits after 3 epochs of SGD
(lr 0.025) while the BatchNorm version learnt. ``batch_norm=False`` gives the blocks
exactly as the text lists them.

Width: the paper does not give the reduction ratio. ``reduction=2`` (attention width =
output channels / 2) is the default because it comes closest to the paper's parameter
counts: 1.44M at 80 initial channels (paper: 1.75M, Table VII) and 2.07M at 96 (paper:
2.52M, Table III), where ``reduction=1`` would give about 3.9M and 5.7M.

The seven candidates (Table II) are registered as operations of the ``fullattn`` pool;
each factory has the signature ``(in_channels, out_channels, stride=1, *, reduction=2,
batch_norm=True) -> SelfAttentionBlock``.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnas.core.errors import ConfigError, DataError, unknown_name
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention
from attnas.ops.fullattn.nonlocal_self_attention import NonLocalSelfAttention
from attnas.registry import register_op

__all__ = ["CANDIDATES", "PAPER_LABELS", "SelfAttentionBlock", "make_candidate", "candidate_spec"]

#: Registered names of the Table II candidates, in the table's order.
CANDIDATES: tuple[str, ...] = (
    "local_sa_k3_h4",
    "local_sa_k3_h8",
    "local_sa_k5_h4",
    "local_sa_k5_h8",
    "local_sa_k7_h4",
    "local_sa_k7_h8",
    "non_local_sa",
)

#: Names as printed in the paper (Table II, Fig. 5).
PAPER_LABELS: dict[str, str] = {
    **{f"local_sa_k{k}_h{h}": f"Local SA_k{k}_h{h}" for k in (3, 5, 7) for h in (4, 8)},
    "non_local_sa": "Non-local SA",
}

_SPECS: dict[str, tuple[str, int | None, int | None]] = {
    **{f"local_sa_k{k}_h{h}": ("local", k, h) for k in (3, 5, 7) for h in (4, 8)},
    "non_local_sa": ("nonlocal", None, None),
}


def candidate_spec(name: str) -> tuple[str, int | None, int | None]:
    """``(kind, spatial extent, heads)`` of a candidate; ``kind`` is ``local`` or ``nonlocal``.

    Raises:
        ConfigError: For a name that is not a Table II candidate.
    """
    if name not in _SPECS:
        raise ConfigError(unknown_name("full-attention operation", name, CANDIDATES))
    return _SPECS[name]


def _bn(channels: int, enabled: bool) -> nn.Module:
    return nn.BatchNorm2d(channels) if enabled else nn.Identity()


class SelfAttentionBlock(nn.Module):
    """Bottleneck self-attention block (Zhou et al., 2021, Fig. 1(c)/(d)).

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        attention: The attention operation, mapping ``mid_channels`` to ``mid_channels``
            at stride 1.
        mid_channels: Width of the attention (after the 1x1 reduction).
        stride: 1, or 2 for an average pooling after the expansion.
        batch_norm: Add BatchNorm after the 1x1 layers, the attention and the projection.

    Shapes:
        - **input:** ``[B, in_channels, H, W]``
        - **output:** ``[B, out_channels, ceil(H/stride), ceil(W/stride)]``
    """

    def __init__(self, in_channels: int, out_channels: int, attention: nn.Module, mid_channels: int,
                 stride: int = 1, batch_norm: bool = True):
        super().__init__()
        if stride not in (1, 2):
            raise ConfigError(f"SelfAttentionBlock: stride must be 1 or 2, got {stride}")
        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        self.reduce = nn.Conv2d(in_channels, mid_channels, 1, bias=not batch_norm)
        self.reduce_norm = _bn(mid_channels, batch_norm)
        self.attention = attention
        self.attention_norm = _bn(mid_channels, batch_norm)
        self.expand = nn.Conv2d(mid_channels, out_channels, 1, bias=not batch_norm)
        self.expand_norm = _bn(out_channels, batch_norm)
        self.pool = nn.AvgPool2d(stride, stride, ceil_mode=True) if stride > 1 else nn.Identity()
        if stride == 1 and in_channels == out_channels:
            self.shortcut: nn.Module = nn.Identity()
        else:
            self.shortcut = nn.Sequential(
                nn.AvgPool2d(stride, stride, ceil_mode=True) if stride > 1 else nn.Identity(),
                nn.Conv2d(in_channels, out_channels, 1, bias=not batch_norm),
                _bn(out_channels, batch_norm),
            )

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise DataError(f"SelfAttentionBlock expects [B, {self.in_channels}, H, W], got {tuple(x.shape)}")
        h = self.reduce_norm(self.reduce(x)).relu()
        h = self.attention_norm(self.attention(h)).relu()
        h = self.pool(self.expand_norm(self.expand(h)))
        return h + self.shortcut(x)


def make_candidate(name: str, in_channels: int, out_channels: int, stride: int = 1, *, reduction: int = 2,
                   batch_norm: bool = True) -> SelfAttentionBlock:
    """Build the Table II candidate ``name`` as a block of Fig. 1(c)/(d).

    Args:
        name: One of :data:`CANDIDATES`.
        in_channels: Input channels.
        out_channels: Output channels.
        stride: 1 or 2.
        reduction: Attention width is ``out_channels // reduction``.
        batch_norm: See :class:`SelfAttentionBlock`.

    Raises:
        ConfigError: Unknown name, or a width that the heads cannot split.
    """
    kind, ks, heads = candidate_spec(name)
    if reduction < 1 or out_channels % reduction:
        raise ConfigError(f"{name}: out_channels={out_channels} is not divisible by reduction={reduction}")
    mid = out_channels // reduction
    if kind == "local":
        if mid % heads or mid % 2:
            raise ConfigError(
                f"{name}: attention width {mid} (= {out_channels} / reduction {reduction}) must be even and "
                f"divisible by {heads} heads"
            )
        attention: nn.Module = LocalSelfAttention(mid, mid, kernel_size=ks, heads=heads)
    else:
        attention = NonLocalSelfAttention(mid, mid)
    return SelfAttentionBlock(in_channels, out_channels, attention, mid, stride=stride, batch_norm=batch_norm)


def _register(name: str) -> None:
    label = PAPER_LABELS[name]

    def factory(in_channels: int, out_channels: int, stride: int = 1, **options) -> SelfAttentionBlock:
        return make_candidate(name, in_channels, out_channels, stride, **options)

    factory.__name__ = factory.__qualname__ = f"make_{name}"
    factory.__doc__ = f"{label} building block (Zhou et al., 2021, Table II and Fig. 1)."
    register_op("fullattn", name, help=f"{label} block (full-attention NAS, Table II)")(factory)


for _name in CANDIDATES:
    _register(_name)
