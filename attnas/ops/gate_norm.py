r"""``sigmoid(BN(z))``, the end of the relaxed HOGA cell's spatial gates (AutoLA Eqs. 6, 8).

.. math::
    s = \mathcal{S}\Big(\gamma \frac{z - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta\Big)

with the batch statistics :math:`\mu, \sigma^2` of each channel in training (and the running
statistics updated as ``F.batch_norm`` updates them), the running ones in evaluation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def batch_norm_sigmoid(z: torch.Tensor, running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                       weight: torch.Tensor, bias: torch.Tensor, training: bool, momentum: float,
                       eps: float) -> torch.Tensor:
    """``torch.sigmoid(F.batch_norm(z, running_mean, running_var, weight, bias, training, momentum, eps))``.

    Args:
        z: ``(B, G, H, W)`` (or any ``(B, G, ...)``).
        running_mean, running_var: ``(G,)`` running statistics, updated in place in training;
            or ``None``.
        weight, bias: ``(G,)`` affine parameters.
        training: Normalise with the batch's statistics (and update the running ones).
        momentum: Weight of the batch's statistics in the running averages.
        eps: Added to the variance.

    Returns:
        The gate, shaped like ``z``.
    """
    return torch.sigmoid(F.batch_norm(z, running_mean, running_var, weight, bias, training, momentum, eps))
