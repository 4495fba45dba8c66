"""Linear Transformer attention block (kernelised attention with the elu + 1 feature map)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.registry import register_op
from attnas.ops.attention_mechanisms.base import AttentionBlock


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    r"""The Linear Transformer's feature map :math:`\phi(x) = \mathrm{elu}(x) + 1`.

    Katharopoulos et al. 2020, "Transformers are RNNs", Sec. 3.2.1.
    """
    return F.elu(x) + 1.0


def kernel_attention(qf: torch.Tensor, kf: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                     eps: float = 1e-6) -> torch.Tensor:
    r"""Non-causal attention with positive feature maps, in time and memory linear in ``L``.

    .. math::
        V'_i = \frac{\phi(Q_i)^\top \sum_j \phi(K_j) V_j^\top}{\phi(Q_i)^\top \sum_j \phi(K_j)}

    (Katharopoulos et al. 2020, Sec. 3.2, Eq. 5-6; Performer's FAVOR+ uses the same product with
    random features). Padded keys are removed by zeroing their features.

    Args:
        qf: Query features ``[B, H, L, m]`` (non-negative).
        kf: Key features ``[B, H, L, m]`` (non-negative).
        v: Values ``[B, H, L, d]``.
        mask: ``[B, L]`` bool, True at real tokens.
        eps: Added to the normaliser.

    Returns:
        ``[B, H, L, d]``.
    """
    kf = kf * mask[:, None, :, None].to(kf.dtype)
    kv = torch.einsum("bhlm,bhld->bhmd", kf, v)
    normaliser = torch.einsum("bhlm,bhm->bhl", qf, kf.sum(dim=2))
    return torch.einsum("bhlm,bhmd->bhld", qf, kv) / (normaliser.unsqueeze(-1) + eps)


@register_op("mechanism", "linear")
class LinearAttention(AttentionBlock):
    r"""Linear Transformer attention (Katharopoulos et al. 2020, "Transformers are RNNs").

    The softmax similarity is replaced by the kernel
    :math:`\mathrm{sim}(q, k) = \phi(q)^\top \phi(k)` with
    :math:`\phi(x) = \mathrm{elu}(x) + 1` (Sec. 3.2.1), and associativity gives the linear
    form of Sec. 3.2 (Eq. 5-6) (see :func:`kernel_attention`): no ``L x L`` matrix is formed, time
    and memory are :math:`O(L d_h^2)`.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is unused here (the block accepts any length).

    Args:
        eps: Added to the normaliser for numerical safety.
    """

    mechanism = "linear"
    memory_growth = "L"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, eps: float = 1e-6):
        super().__init__(dim, heads, head_dim, max_len)
        self.eps = eps

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return kernel_attention(elu_feature_map(q), elu_feature_map(k), v, mask, self.eps)
