"""The Strategy role: how a space is searched.

A strategy owns its search loop and its state, talks to the space only through the
:class:`~attnas.spaces.base.Space` methods, and checkpoints its state in the run
directory so that a killed search resumes where it stopped and ends with the same
architecture. It declares the space capabilities it needs in :attr:`Strategy.requires`;
a space without them is refused before any work starts. Everything else it needs from
its options, the space and the task is checked by :meth:`Strategy.check` and
:meth:`Strategy.check_task`, which the pipeline calls before it creates the run
directory: a search that starts does not stop later for an incompatible input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from attnas.arch import Arch
from attnas.parallel import RunSpec, SequentialExecutor
from attnas.runs import RunDir


@dataclass
class SearchResult:
    """What a search found.

    Attributes:
        arch: The chosen architecture.
        metrics: Flat search-side metrics (e.g. the supernet validation score of ``arch``).
    """

    arch: Arch
    metrics: dict = field(default_factory=dict)


class Strategy:
    """Base class of search strategies.

    Args:
        options: The strategy's validated ``Config`` dataclass instance.
        space: The space to search.
        task: The task that scores architectures.
        run: The run directory (events and checkpoints go there).
        seed: The run's seed.

    Attributes:
        executor: Where independent work may run in parallel
            (:class:`~attnas.parallel.Executor`; the pipeline sets it from ``--workers``).
        spec: What a worker needs to rebuild the space and task
            (:class:`~attnas.parallel.RunSpec`; set by the pipeline, ``None`` otherwise).
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    #: Whether the pipeline trains the found architecture afterwards (``retrain`` settings,
    #: ``model.pt``). A strategy whose search ends in its own final evaluation, whose result
    #: is not a network to train (e.g. ``graph-vae``: a trained graph VAE and its metrics),
    #: sets this to False: its metrics are the run's ``metrics.json`` and it writes its own
    #: artefacts into the run directory.
    final_training: ClassVar[bool] = True

    def __init__(self, options: Any, space: Any, task: Any, run: RunDir, seed: int = 0):
        self.options = options if options is not None else (self.Config() if self.Config else None)
        self.space, self.task, self.run, self.seed = space, task, run, seed
        self.executor = SequentialExecutor()
        self.spec: RunSpec | None = None
        for capability in self.requires:
            space.require(capability, self.name)

    @classmethod
    def check(cls, options: Any, space: Any) -> None:
        """Validate ``options`` against ``space`` before any data is loaded or anything written.

        For example a given architecture, or a file the options name.

        Raises:
            AttnasError: Naming the problem.
        """

    @classmethod
    def check_task(cls, options: Any, space: Any, task: Any) -> None:
        """Validate ``options`` and ``space`` against the loaded ``task`` before anything is written.

        Called after :meth:`check` and the space's own ``check_task``, before the run
        directory is created. Checks that need the task's data go here (e.g. the kind of
        data the strategy reads, the splits it trains on).

        Raises:
            AttnasError: Naming the problem.
        """

    @classmethod
    def random_counterpart(cls, options: Any, space: Any, seed: int) -> dict | None:
        """The ``strategy`` section of random search in ``space`` at this strategy's budget.

        ``attnas compare`` runs it next to the search. The default suits a strategy that
        scores no candidates but derives one architecture (DARTS and its variants): one
        architecture drawn from the space's prior with ``seed``, trained like the found
        one (AutoLA's Rand_HOGA, Table 6). Strategies that score candidates return random
        search with the same number of scored architectures; random search itself returns
        ``None`` (it is its own counterpart).
        """
        return {"name": "fixed", "arch": space.sample(random.Random(seed)).choices}

    @property
    def device(self) -> torch.device:
        """Where the task's tensors live."""
        return getattr(self.task, "device", torch.device("cpu"))

    def search(self) -> SearchResult | None:
        """Run (or resume) the search and return the chosen architecture.

        In a distributed run (:mod:`attnas.distributed`) a rank other than 0 may return
        ``None`` once the data-parallel part is done; rank 0 finishes the search.
        """
        raise NotImplementedError

    def initial_model(self, arch: Arch) -> nn.Module | None:
        """A model of ``arch`` initialised from the search's shared weights, if it has any."""
        return None
