"""Operations shared by every pool: zero and identity (Table 3, "common")."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Zero(nn.Module):
    """``lambda x: 0`` (Table 3). Networks skip it; calling it returns zeros of ``x``'s shape."""

    is_zero = True

    def forward(self, x: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        return torch.zeros_like(x)


class Identity(nn.Module):
    """``lambda x: x`` (Table 3)."""

    def forward(self, x: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        return x


ACTIVATIONS = {
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "leaky_relu": nn.LeakyReLU,
    "linear": nn.Identity,
}


def activation(name: str) -> nn.Module:
    """An activation module by name."""
    from attnas.core.errors import ConfigError, unknown_name

    if name not in ACTIVATIONS:
        raise ConfigError(unknown_name("activation", name, ACTIVATIONS))
    return ACTIVATIONS[name]()


def register_common_ops(pool: str, identity: bool = True) -> None:
    """Register ``zero`` and (unless ``identity`` is False) ``identity`` (Table 3's common operations) in ``pool``."""
    from attnas.registry import register_op

    def zero(dim: int, **_: Any) -> nn.Module:
        """Zero operation."""
        return Zero()

    def make_identity(dim: int, **_: Any) -> nn.Module:
        """Identity operation."""
        return Identity()

    register_op(pool, "zero")(zero)
    if identity:
        register_op(pool, "identity")(make_identity)
