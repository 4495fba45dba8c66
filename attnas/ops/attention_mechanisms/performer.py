"""Performer attention block (FAVOR+: positive orthogonal random features)."""

from __future__ import annotations

import math

import torch

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import AttentionBlock
from attnas.ops.attention_mechanisms.linear import kernel_attention
from attnas.registry import register_op


def orthogonal_gaussian(features: int, dim: int, *, device=None, dtype=torch.float32,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Orthogonal random features :math:`\omega_1, \dots, \omega_m \in \mathbb{R}^d` (Performer, Sec. 2.4).

    Stacks ``ceil(m / d)`` blocks of ``d`` exactly orthogonal directions (QR of a
    Gaussian matrix, with the signs fixed so the directions are uniform) and rescales
    every row by the norm of an independent :math:`\mathcal{N}(0, I_d)` vector, so each
    row is marginally Gaussian while rows within a block are orthogonal (Choromanski et
    al. 2021, "Rethinking Attention with Performers", ORFs).

    Args:
        features: Number of features ``m``.
        dim: Dimension ``d`` of each feature vector.
        device: Where to create them.
        dtype: Floating type.
        generator: Optional torch generator (default: the global RNG).

    Returns:
        ``[m, d]``.
    """
    n_blocks = math.ceil(features / dim)
    g = torch.randn(n_blocks, dim, dim, device=device, dtype=dtype, generator=generator)
    q, r = torch.linalg.qr(g)
    # sign fix: makes Q Haar-distributed (LAPACK's Householder signs would bias the directions)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    w = q.transpose(-1, -2).reshape(n_blocks * dim, dim)[:features]
    norms = torch.randn(features, dim, device=device, dtype=dtype, generator=generator).norm(dim=1, keepdim=True)
    return w * norms


def positive_random_features(x: torch.Tensor, omega: torch.Tensor, *, is_query: bool,
                             mask: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    r"""FAVOR+ positive random features of (already :math:`d^{-1/4}`-scaled) ``x``.

    .. math::
        \phi(x) = \frac{1}{\sqrt m}\exp\!\left(-\tfrac{\lVert x\rVert^2}{2}\right)
        \left(\exp(\omega_1^\top x), \dots, \exp(\omega_m^\top x)\right)

    (Performer, Sec. 2.3, Lemma 1: :math:`h(x) = \exp(-\lVert x\rVert^2/2)`,
    :math:`f = \exp`), so that :math:`\mathbb{E}[\phi(q)^\top\phi(k)] = \exp(q^\top k)`.
    For numerical stability a maximum is subtracted inside the exponential: per query
    row for queries, and over all real keys (and features) of a head for keys; both
    factors cancel in the attention normalisation.

    Args:
        x: ``[B, H, L, d]``.
        omega: Random features ``[m, d]``.
        is_query: Queries get a per-row stabiliser, keys a per-head one.
        mask: ``[B, L]`` bool (keys only): the key stabiliser is taken over real keys.
        eps: Small constant added to every feature.

    Returns:
        ``[B, H, L, m]``.
    """
    proj = torch.einsum("bhld,md->bhlm", x, omega)
    sq = 0.5 * (x * x).sum(dim=-1, keepdim=True)
    if is_query:
        stab = proj.amax(dim=-1, keepdim=True)
    else:
        p = proj if mask is None else proj.masked_fill(~mask[:, None, :, None], float("-inf"))
        stab = p.amax(dim=(-1, -2), keepdim=True)
        stab = torch.where(torch.isfinite(stab), stab, torch.zeros_like(stab))  # a head with no real key
    return (torch.exp(proj - sq - stab.detach()) + eps) * omega.shape[0] ** -0.5


@register_op("mechanism", "performer")
class PerformerAttention(AttentionBlock):
    r"""Performer attention (Choromanski et al. 2021, "Rethinking Attention with Performers").

    FAVOR+ approximates the softmax kernel
    :math:`\exp(q^\top k / \sqrt{d_h})` by :math:`\phi(q')^\top\phi(k')` with positive
    orthogonal random features (:func:`positive_random_features`,
    :math:`q' = q\, d_h^{-1/4}`) and computes attention in the linear form
    :math:`\hat D^{-1}(\phi(Q')(\phi(K')^\top V))` (Sec. 2.2-2.3), in time and
    memory :math:`O(L m d_h)`.

    The features are a buffer shared by the heads. They are redrawn every
    ``redraw_every`` training forward passes (the paper's feature redrawing; 0: never),
    never in ``eval()`` mode or while frozen (:meth:`freeze_random`).

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is unused here (the block accepts any length).

    Args:
        features: Number of random features ``m`` (LRA uses 256).
        orthogonal: Orthogonal (True, FAVOR+) or i.i.d. Gaussian features.
        redraw_every: Redraw the features every this many training forward passes.
    """

    mechanism = "performer"
    memory_growth = "L"
    has_random = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024,
                 features: int = 256, orthogonal: bool = True, redraw_every: int = 1000):
        super().__init__(dim, heads, head_dim, max_len)
        if features < 1:
            raise ConfigError(f"{self._what()}: features must be >= 1, got {features}")
        if redraw_every < 0:
            raise ConfigError(f"{self._what()}: redraw_every must be >= 0, got {redraw_every}")
        self.features, self.orthogonal, self.redraw_every = features, orthogonal, redraw_every
        self.register_buffer("omega", torch.empty(features, self.head_dim))
        self.redraw_random()

    def redraw_random(self) -> None:
        dev = self.omega.device
        if self.orthogonal:
            w = orthogonal_gaussian(self.features, self.head_dim, device=dev)
        else:
            w = torch.randn(self.features, self.head_dim, device=dev)
        self.omega.copy_(w)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s = self.head_dim**-0.25
        omega = self.omega.to(q.dtype)
        qf = positive_random_features(q * s, omega, is_query=True)
        kf = positive_random_features(k * s, omega, is_query=False, mask=mask)
        return kernel_attention(qf, kf, v, mask, eps=0.0)
