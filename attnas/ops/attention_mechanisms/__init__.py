"""Candidate multi-head attention blocks for attention-mechanism search (DARTFormer, Sec. 3.2).

Every mechanism is a complete attention block (its own query/key/value/output
projections), registered with ``register_op("mechanism", name)`` and built with
:func:`build_mechanism`::

    block = build_mechanism("performer", dim=64, heads=4, max_len=512, features=128)
    y = block(x, mask)            # x [B, L, 64], mask [B, L] bool (True = real token)

Single-head blocks for the heterogeneous search are ``heads=1, head_dim=dim // H``.
"""

from __future__ import annotations

from typing import Any

from attnas.core.errors import ConfigError, did_you_mean
from attnas.ops.attention_mechanisms.base import AttentionBlock


def mechanism_names() -> list[str]:
    """Names of the registered attention mechanisms."""
    from attnas import registry

    return registry.names("op", group="mechanism")


def build_mechanism(name: str, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024,
                    **options: Any) -> AttentionBlock:
    """Build the attention block ``name``.

    Args:
        name: A registered mechanism (see :func:`mechanism_names`); an unknown name raises
            :class:`~attnas.core.errors.ConfigError` listing the valid ones.
        dim: Model (feature) dimension ``D`` of the input and output.
        heads: Number of heads ``H`` of the block.
        head_dim: Per-head dimension (default ``dim // heads``).
        max_len: Longest sequence the block must accept (mechanisms with length-sized
            parameters or patterns are built for it).
        **options: Mechanism-specific options (e.g. ``features`` for performer); an
            unknown option raises :class:`~attnas.core.errors.ConfigError`.

    Returns:
        The block, an :class:`AttentionBlock`.
    """
    from attnas import registry

    cls = registry.get("op", name, group="mechanism")
    allowed = cls.option_names()
    for key in options:
        if key not in allowed:
            raise ConfigError(
                f"mechanism '{name}': unknown option '{key}'{did_you_mean(key, allowed)}; "
                f"valid options: {', '.join(sorted(allowed)) or '(none)'}"
            )
    return cls(dim, heads=heads, head_dim=head_dim, max_len=max_len, **options)


__all__ = ["AttentionBlock", "build_mechanism", "mechanism_names"]
