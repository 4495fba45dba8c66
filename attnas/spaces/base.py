"""The Space role: what an architecture is.

A space owns the meaning of its architectures' ``choices``. Strategies talk to a space
only through the methods below; a space declares which strategy families it supports
in :attr:`Space.capabilities` and :meth:`Space.require` refuses the rest with a message
that says why.

Capabilities:
    ``one-shot``: :meth:`supernet` returns a weight-sharing network whose
        ``forward(batch, arch)`` runs the sampled sub-architecture.
    ``relaxed``: :meth:`relaxed` returns a continuous relaxation (mixed operations with
        architecture parameters kept apart from weights) and :meth:`derive` discretises it.
    ``dag``: :meth:`to_dag` turns an architecture into a DAG for graph encoders.
    ``contexts``: the supernet keeps modules per context (AutoAttend, Sec. 4.2.2) and can
        share them for a warm-up (``share_contexts`` / ``split_contexts``).
    ``mechanism-supernet``: :meth:`supernet` takes ``mode`` (``homogeneous`` or
        ``heterogeneous``) and returns DARTFormer's fixed-alpha network of candidate
        attention blocks (``forward(batch)``, plus ``masked``/``drop``/``kept``), driven
        by the ``mechanism-search`` strategy (see
        :mod:`attnas.spaces.attention_mechanisms`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from torch import nn

from attnas.core.arch import Arch
from attnas.core.errors import ArchError, UnsupportedError


@dataclass(frozen=True)
class Baseline:
    """A hand-designed architecture that a search in a space is judged against (``attnas compare``).

    Attributes:
        arch: The architecture's ``choices``.
        space: The ``space`` section it is built in (``name`` and options); ``None``: the
            searched space itself, with the recipe's options.
        description: One line for the comparison table.
        retrain: The training protocol of the baseline's own paper, as ``retrain`` keys
            (``epochs``, ``lr``, ``weight_decay``, ``patience``, ...) that replace the
            recipe's for this row; ``None``: the recipe's ``retrain`` budget.
    """

    arch: dict
    space: dict | None = None
    description: str = ""
    retrain: dict | None = None



def prior_draws(n: int) -> int:
    """How many prior draws a search makes looking for ``n`` distinct (or feasible)
    architectures before it gives up with fewer: ``50 n + 100`` (a small space, or tight
    constraints, may hold fewer)."""
    return 50 * n + 100

class Space:
    """Base class of search spaces.

    Args:
        options: The space's validated ``Config`` dataclass instance.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type | None] = None
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: Task kinds (``TaskInfo.kind``) the space builds networks for; ``None``: decided by
    #: :meth:`check_task` (e.g. AutoAttend's domain adapters).
    task_kinds: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, options: Any = None):
        self.options = options if options is not None else (self.Config() if self.Config else None)

    # -- the architecture distribution --------------------------------------------------------

    def sample(self, rng: random.Random) -> Arch:
        """Draw an architecture from the space's prior Γ(A)."""
        raise NotImplementedError

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Return a valid neighbour of ``arch`` that differs from it."""
        raise NotImplementedError

    def validate(self, arch: Arch) -> None:
        """Raise :class:`ArchError` naming the first invalid choice of ``arch``."""
        if arch.space != self.name:
            raise ArchError(f"architecture is for space '{arch.space}', not '{self.name}'")

    @staticmethod
    def layer_list(arch: Arch, n_layers: int) -> list:
        """``arch.choices["layers"]`` of a layered space, checked to be the only key and ``n_layers`` long."""
        ch = arch.choices
        if set(ch) != {"layers"}:
            raise ArchError(f"choices must have exactly the key 'layers', got {sorted(ch)}")
        layers = ch["layers"]
        if not isinstance(layers, list) or len(layers) != n_layers:
            got = len(layers) if isinstance(layers, list) else type(layers).__name__
            raise ArchError(f"expected {n_layers} layers, got {got}")
        return layers

    def size(self) -> int:
        """Number of architectures in the space (exact where the paper gives a formula)."""
        raise NotImplementedError

    # -- networks ------------------------------------------------------------------------------

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """A standalone ``nn.Module`` for ``arch`` on ``task`` (``forward(batch)``)."""
        raise NotImplementedError

    def supernet(self, task: Any) -> nn.Module:
        """A weight-sharing supernet (``forward(batch, arch)``); needs ``one-shot``."""
        raise UnsupportedError(f"space '{self.name}' has no one-shot supernet")

    def relaxed(self, task: Any) -> nn.Module:
        """A continuous relaxation for differentiable search; needs ``relaxed``."""
        raise UnsupportedError(f"space '{self.name}' has no continuous relaxation")

    def derive(self, relaxed: nn.Module) -> Arch:
        """The discrete architecture a relaxed network encodes."""
        raise UnsupportedError(f"space '{self.name}' has no continuous relaxation")

    def alpha_arch(self, choice: list[int]) -> Arch:
        """The discrete architecture that takes column ``choice[r]`` on every row ``r`` of the
        relaxed network's architecture weights (one 2-D ``alpha``: a row per edge or layer, a
        column per operation); the per-operation costs of a differentiable search
        (:mod:`attnas.strategies.darts_cost`) are measured on these."""
        raise UnsupportedError(f"space '{self.name}' cannot name the architecture of a choice of alpha columns "
                               f"(strategy.cost needs it)")

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """``(adjacency, operation labels)`` of ``arch``: a DAG in topological order."""
        raise UnsupportedError(f"space '{self.name}' does not describe its architectures as DAGs")

    def describe(self, arch: Arch) -> str:
        """A short human-readable description of ``arch``."""
        return arch.to_json(indent=None)

    def baselines(self) -> dict[str, Baseline]:
        """The hand-designed attention a search of this space must beat, by name.

        ``attnas compare`` trains each of them next to the searched architecture, with
        its own protocol (``Baseline.retrain``) or the recipe's ``retrain`` budget. A space without baselines returns ``{}``.
        """
        return {}

    # -- helpers --------------------------------------------------------------------------------

    def require(self, capability: str, strategy: str) -> None:
        """Refuse a strategy whose needs this space does not meet."""
        if capability not in self.capabilities:
            have = ", ".join(sorted(self.capabilities)) or "none"
            raise UnsupportedError(
                f"strategy '{strategy}' needs a space with '{capability}' support; "
                f"space '{self.name}' supports: {have}"
            )

    def check_task(self, task: Any) -> None:
        """Refuse a task this space builds no networks for (checked before a run writes anything).

        Raises:
            UnsupportedError: Naming the task kind and the kinds the space supports.
        """
        kind = task.info.kind
        if self.task_kinds is not None and kind not in self.task_kinds:
            raise UnsupportedError(f"space '{self.name}' builds networks for {', '.join(map(repr, self.task_kinds))} "
                                   f"tasks, not '{kind}' ({type(task).__name__})")

    def sample_distinct(self, n: int, rng: random.Random) -> list[Arch]:
        """Up to ``n`` distinct architectures from the prior, in the order drawn with ``rng``
        (at most ``50 n + 100`` draws: a small space may give fewer)."""
        seen: set[str] = set()
        out: list[Arch] = []
        for _ in range(prior_draws(n)):
            if len(out) == n:
                break
            a = self.sample(rng)
            if a.key() not in seen:
                seen.add(a.key())
                out.append(a)
        return out

    def arch(self, choices: dict, **meta: Any) -> Arch:
        """Wrap ``choices`` in an :class:`Arch` of this space."""
        return Arch(space=self.name, choices=choices, meta=meta)
