"""The differentiable expected-cost term of the DARTS strategies (``strategy.cost``).

A relaxed network mixes, on every row ``r`` of its architecture weights ``alpha`` (an edge
of a HOGA cell, a layer group of the stage-wise space), the operations of the columns
``c`` with weights ``softmax(alpha_r)``. For a cost that adds up over operations
(parameters, MACs) the cost of a discrete architecture is ``base + sum_r delta[r, c_r]``,
where ``delta[r, c]`` is what column ``c`` on row ``r`` adds over column 0. This module
measures ``delta`` once with :class:`~attnas.costs.cost_model.CostModel` on the space's standalone
networks (:meth:`Space.alpha_arch <attnas.spaces.base.Space.alpha_arch>`: column 0 on every
row, and each single change of it; ``1 + rows * (cols - 1)`` networks), cached in the run's
``costs.jsonl`` so a resumed search does not build them again, and gives the expected cost
under ``softmax(alpha)``::

    E[cost] = base + sum_r sum_c softmax(alpha_r)_c * delta[r, c]

The architecture step adds ``weight * (E[cost] - min cost) / (max cost - min cost)`` to its
loss (``min cost`` and ``max cost``: the cheapest and the costliest architecture's,
``base + sum_r min_c delta[r, c]`` and ``base + sum_r max_c delta[r, c]``), a differentiable
function of ``alpha`` in [0, 1] that pushes it towards cheaper operations; ``weight`` is the
loss the search trades for going from the cheapest to the costliest architecture. (The
span, not the cost itself, is the unit: in AutoLA's HOGA space the cell's operations change
a ResNet-20's parameters by 3 % at most.) The weight step is unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attnas.core.errors import UnsupportedError
from attnas.costs.config import CostsConfig
from attnas.costs.cost_model import CostModel


def single_alpha(model: nn.Module, space_name: str) -> nn.Parameter:
    """The relaxed network's one 2-D ``alpha`` (rows x operations).

    Raises:
        UnsupportedError: When it has several architecture parameters or one of another shape.
    """
    alpha = list(model.arch_parameters())
    if len(alpha) != 1 or alpha[0].dim() != 2:
        raise UnsupportedError(f"strategy.cost: the relaxed network of space '{space_name}' must have one 2-D alpha "
                               f"(rows x operations), got shapes {[tuple(a.shape) for a in alpha]}")
    return alpha[0]


class ExpectedCost:
    """Per-operation costs of a relaxed network and its expected cost under ``softmax(alpha)``.

    Args:
        space: The space (its ``alpha_arch`` names the measured architectures).
        task: The task (device and example batch).
        model: The relaxed network (one 2-D ``alpha``).
        name: ``params`` or ``macs``.
        batch_size: The example batch's size (MACs).
        run: The run directory caching the measurements (``None``: in memory).

    Attributes:
        base: The cost of the architecture with column 0 on every row.
        delta: ``(rows, cols)``: what each column adds over column 0 on its row.
        top: The costliest architecture's cost.
        bottom: The cheapest architecture's cost.
    """

    def __init__(self, space: Any, task: Any, model: nn.Module, name: str, batch_size: int = 1, run: Any = None):
        alpha = single_alpha(model, space.name)
        rows, cols = alpha.shape
        costs = CostModel(space, task, run, CostsConfig(batch_size=batch_size))
        try:
            self.base = float(costs.costs(space.alpha_arch([0] * rows), [name])[name])
            delta = torch.zeros(rows, cols, dtype=torch.float64)
            for r in range(rows):
                for c in range(1, cols):
                    choice = [0] * rows
                    choice[r] = c
                    delta[r, c] = float(costs.costs(space.alpha_arch(choice), [name])[name]) - self.base
        finally:
            costs.close()
        self.name = name
        self.delta = delta.to(device=alpha.device, dtype=torch.float32)
        self.top = self.base + float(delta.max(dim=1).values.sum())
        self.bottom = self.base + float(delta.min(dim=1).values.sum())
        self.measured = costs.measured

    def expected(self, alpha: torch.Tensor) -> torch.Tensor:
        """``E[cost]`` under ``softmax(alpha)`` (differentiable in ``alpha``)."""
        return self.base + (torch.softmax(alpha, dim=-1) * self.delta).sum()

    def fraction(self, alpha: torch.Tensor) -> torch.Tensor:
        """``(E[cost] - min cost) / (max cost - min cost)`` in [0, 1] (the term the
        architecture loss weighs; 0 when every architecture costs the same)."""
        span = self.top - self.bottom
        if span <= 0:
            return alpha.sum() * 0.0
        return (self.expected(alpha) - self.bottom) / span
