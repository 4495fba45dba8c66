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

from attnas.core.arch import Arch
from attnas.runs.run_dir import RunDir
from attnas.scale.parallel import RunSpec, SequentialExecutor


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
            (:class:`~attnas.scale.parallel.Executor`; the pipeline sets it from ``--workers``).
        spec: What a worker needs to rebuild the space and task
            (:class:`~attnas.scale.parallel.RunSpec`; set by the pipeline, ``None`` otherwise).
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    #: Optional packages the strategy imports when it runs (keys of ``attnas.runtime.extras.EXTRAS``);
    #: :func:`attnas.runs.build.check_strategy` names the extra to install before anything is written.
    needs: ClassVar[tuple[str, ...]] = ()
    #: Whether the pipeline trains the found architecture afterwards (``retrain`` settings,
    #: ``model.pt``). A strategy whose search ends in its own final evaluation, whose result
    #: is not a network to train (e.g. ``graph-vae``: a trained graph VAE and its metrics),
    #: sets this to False: its metrics are the run's ``metrics.json`` and it writes its own
    #: artefacts into the run directory.
    final_training: ClassVar[bool] = True
    #: Independent searches ``attnas compare`` runs per searching row by default (its
    #: verdict pairs their means; one-shot strategies, whose result depends on the search
    #: seed more than on the retraining seed, set 3).
    compare_search_seeds: ClassVar[int] = 1

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

        ``attnas compare`` runs it next to the search. A strategy whose cost is training
        (:meth:`search_epochs` is not ``None``: DARTS and its variants, mechanism search)
        gets ``random-trained``: distinct prior architectures, each trained for its share
        of the search's epochs, the best on validation kept
        (:func:`random_trained_section`). Without a training budget, one architecture drawn
        from the prior (:meth:`random_architecture`). Strategies that score candidates
        return random search with the same number of scored architectures; random search
        itself returns ``None`` (it is its own counterpart).
        """
        epochs = cls.search_epochs(options)
        if epochs is None:
            return cls.random_architecture(space, seed)
        return random_trained_section(epochs)

    @classmethod
    def counterpart_space(cls, options: Any, space: Any) -> dict:
        """Space options that make the random rows of ``attnas compare`` draw from the set of
        architectures this search returns, when the recipe's space would draw others
        (e.g. a heterogeneous mechanism search returns cells of single heads, a space with
        ``layout: homogeneous`` draws one mechanism for every layer); empty: the recipe's.
        """
        return {}

    @classmethod
    def search_epochs(cls, options: Any) -> int | None:
        """Passes over the training data the search makes (its compute), or ``None``."""
        return None

    @staticmethod
    def random_architecture(space: Any, seed: int) -> dict:
        """The ``strategy`` section of one architecture drawn from the prior with ``seed``
        (AutoLA's Rand_HOGA, Table 6): ``attnas compare --random-architecture``."""
        return {"name": "fixed", "arch": space.sample(random.Random(seed)).choices}

    @property
    def device(self) -> torch.device:
        """Where the task's tensors live."""
        return getattr(self.task, "device", torch.device("cpu"))

    def search(self) -> SearchResult | None:
        """Run (or resume) the search and return the chosen architecture.

        In a distributed run (:mod:`attnas.scale.distributed`) a rank other than 0 may return
        ``None`` once the data-parallel part is done; rank 0 finishes the search.
        """
        raise NotImplementedError

    def initial_model(self, arch: Arch) -> nn.Module | None:
        """A model of ``arch`` initialised from the search's shared weights, if it has any."""
        return None


#: Most architectures a ``random-trained`` counterpart trains (the rest of the budget goes
#: into training each one longer).
RANDOM_TRAINED_SAMPLES = 8


def random_trained_section(epochs: int) -> dict:
    """``random-trained`` with ``epochs`` passes over the training data in all.

    ``min(8, epochs)`` architectures, each trained ``epochs // samples`` epochs (so the
    total never exceeds the search's). ``attnas compare`` fills the rest of ``train`` with
    the recipe's ``retrain`` optimiser.
    """
    samples = min(RANDOM_TRAINED_SAMPLES, epochs)
    return {"name": "random-trained", "samples": samples, "train": {"epochs": epochs // samples, "patience": 0}}

