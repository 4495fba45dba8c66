"""Plug-and-play: insert an attention module into every residual block of a model.

AutoLA's searched cell, like SE and CBAM, is a module that any ResNet-like backbone can carry
(Ma et al., NeurIPS 2020, Sec. 4: "HOGA is a general module which can be integrated into any
well-established CNN architectures"). :func:`attach_attention` does that for a model you
already have::

    from attnas.models.attach import attach_attention
    from attnas.ops.autola.attention_modules import CBAM

    attach_attention(model, lambda c: CBAM(c, reduction=16))          # CBAM everywhere
    attach_attention(model, space.attention_factory(arch))             # a searched HOGA cell

Two insertion points:

* ``"branch"`` -- on the residual branch, before the shortcut is added (where SE, CBAM and
  AutoLA put attention); needs a block with an ``attn`` slot (an ``nn.Identity`` placeholder,
  as the blocks of :mod:`attnas.models.resnet_cifar` have);
* ``"after"`` -- after the whole block: the block is replaced by
  :class:`AttentionAfter` ``(block, attention)``; works for any block.

``"auto"`` (default) takes ``"branch"`` where the block has an ``attn`` slot, ``"after"``
elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import nn

from attnas.core.errors import ConfigError

DEFAULT_BLOCK_NAMES = ("BasicBlock", "Bottleneck")


class AttentionAfter(nn.Module):
    """A residual block followed by an attention module.

    Args:
        block: The original block.
        attn: The attention module applied to the block's output.

    Shapes:
        - input: whatever ``block`` takes
        - output: ``block``'s output shape
    """

    def __init__(self, block: nn.Module, attn: nn.Module):
        super().__init__()
        self.block = block
        self.attn = attn

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.attn(self.block(*args, **kwargs))


def _matches(module: nn.Module, block_types: Sequence[type | str]) -> bool:
    for t in block_types:
        if isinstance(t, str):
            if type(module).__name__ == t:
                return True
        elif isinstance(module, t):
            return True
    return False


def _out_channels(block: nn.Module) -> int | None:
    ch = getattr(block, "out_channels", None)
    if isinstance(ch, int):
        return ch
    convs = [m for m in block.modules() if isinstance(m, nn.Conv2d)]
    if convs:
        return convs[-1].out_channels
    bns = [m for m in block.modules() if isinstance(m, nn.BatchNorm2d)]
    return bns[-1].num_features if bns else None


@torch.no_grad()
def _traced_channels(model: nn.Module, blocks: list[nn.Module], example: Any) -> dict[int, int]:
    seen: dict[int, int] = {}
    hooks = [b.register_forward_hook(lambda m, i, o: seen.__setitem__(id(m), int(o.shape[1]))) for b in blocks]
    was_training = model.training
    try:
        model.eval()
        model(example)
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    return seen


def attach_attention(model: nn.Module, factory: Callable[[int], nn.Module],
                     block_types: Sequence[type | str] = DEFAULT_BLOCK_NAMES, *,
                     where: Literal["auto", "branch", "after"] = "auto", example_input: Any = None) -> nn.Module:
    """Insert ``factory(channels)`` into every residual block of ``model`` (in place).

    Args:
        model: A ResNet-like model.
        factory: Builds the attention module for a block with ``channels`` output channels
            (an attention class, a ``functools.partial``, or
            :meth:`~attnas.spaces.hoga.HOGASpace.attention_factory` of a searched cell).
        block_types: Block classes, or class names, to equip (default: classes named
            ``BasicBlock`` or ``Bottleneck``, as in torchvision and in attnas).
        where: ``"branch"``, ``"after"`` or ``"auto"`` (see the module docstring).
        example_input: An input for ``model``; when given, each block's output channels are
            measured by running it once instead of read from the block's layers.

    Returns:
        ``model``, with the modules inserted.

    Raises:
        ConfigError: When no block matches, a block's channels cannot be found, or
            ``where="branch"`` meets a block without an ``attn`` slot.
    """
    if where not in ("auto", "branch", "after"):
        raise ConfigError(f"where: expected 'auto', 'branch' or 'after', got {where!r}")
    targets = [(name, m) for name, m in model.named_modules() if name and _matches(m, block_types)]
    # a block nested in a matched block (or in an earlier AttentionAfter) is left alone
    targets = [(n, m) for n, m in targets if not any(n.startswith(p + ".") for p, _ in targets if p != n)]
    if not targets:
        names = ", ".join(t if isinstance(t, str) else t.__name__ for t in block_types)
        raise ConfigError(f"attach_attention: no block of type {names} in {type(model).__name__}; "
                          f"pass block_types= with your block classes")
    traced = _traced_channels(model, [m for _, m in targets], example_input) if example_input is not None else {}
    for name, block in targets:
        channels = traced.get(id(block)) or _out_channels(block)
        if channels is None:
            raise ConfigError(f"attach_attention: cannot tell the output channels of block '{name}' "
                              f"({type(block).__name__}); pass example_input=")
        slot = isinstance(getattr(block, "attn", None), nn.Module)
        mode = ("branch" if slot else "after") if where == "auto" else where
        if mode == "branch":
            if not slot:
                raise ConfigError(f"attach_attention: block '{name}' ({type(block).__name__}) has no 'attn' slot "
                                  f"on its residual branch; use where='after'")
            block.attn = factory(channels)
        else:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, AttentionAfter(block, factory(channels)))
    return model
