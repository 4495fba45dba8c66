"""Training a graph VAE, with every piece of state explicit so a strategy can resume it.

D-VAE's optimisation (Zhang et al. 2019, public ``train.py``; Chatzianastasis et al., 2021, Appendix B uses
the same settings): Adam with learning rate ``1e-4``, batches of 32 graphs shuffled every
epoch, 300 epochs, and ``ReduceLROnPlateau(factor=0.1, patience=10)`` stepped on the
epoch's summed training loss. Chatzianastasis et al., 2021, Sec. 3.3 and Appendix B: DVAE-EMB is trained for
``T = 4`` iterations of 300 epochs; iteration 1 initialises the operation embeddings
from ``N(0, 1)`` and every later iteration trains a freshly initialised model whose
operation embeddings start from the last epoch of the previous iteration (GCN-EMB:
``T = 1``).

A :class:`TrainState` holds the model, optimiser, scheduler, the epoch and iteration
counters, the random generator (shuffling and reparameterisation noise) and the loss
history; :meth:`TrainState.state_dict` / :meth:`TrainState.from_state_dict` turn it into
checkpointable data and back, and training resumed from an epoch boundary continues
exactly as the uninterrupted run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Literal

import torch
from torch.optim.lr_scheduler import ReduceLROnPlateau

from attnas.config import CheckedConfig, NonNegativeInt, PositiveFloat, PositiveInt, Range, Seed
from attnas.core.errors import CheckpointError, DataError, check_finite_loss
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.vae import GraphVAE, GraphVAEConfig, precision_context
from attnas.reporting.progress import progress


@dataclass(frozen=True)
class VAEOptimConfig(CheckedConfig):
    """How a graph VAE is optimised: the ``train:`` section of the strategies that train one
    (defaults: D-VAE's / Chatzianastasis et al.'s protocol).

    Attributes:
        epochs: Epochs per iteration (paper: 300).
        batch_size: Graphs per batch (paper: 32).
        lr: Adam learning rate (paper: 1e-4).
        plateau_factor: ``ReduceLROnPlateau`` factor (D-VAE: 0.1).
        plateau_patience: ``ReduceLROnPlateau`` patience in epochs (D-VAE: 10).
        max_batches: Stop each epoch after this many batches (None: the whole epoch).
        precision: ``"fp32"`` (default) or ``"bf16"``: the loss's matrix products under
            bf16 autocast (:func:`~attnas.graphvae.vae.precision_context`); the weights,
            the optimiser and the recurrent states stay fp32. Not the paper's setting: an
            explicit speed option (see docs/results/opemb.md for its quality check).
    """

    epochs: PositiveInt = 300
    batch_size: PositiveInt = 32
    lr: PositiveFloat = 1e-4
    plateau_factor: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.1
    plateau_patience: NonNegativeInt = 10
    max_batches: PositiveInt | None = None
    precision: Literal["fp32", "bf16"] = "fp32"


@dataclass(frozen=True)
class VAETrainConfig(VAEOptimConfig):
    """Everything one graph-VAE training uses: :class:`VAEOptimConfig`'s options, the
    iterations and the seed.

    Attributes:
        iterations: ``T``, full trainings that carry the operation embeddings over
            (Chatzianastasis et al., 2021: 4 for DVAE-EMB, 1 otherwise).
        seed: Seed of the model initialisation, the batch order and the noise.
    """

    iterations: PositiveInt = 1
    seed: Seed = 0

    @classmethod
    def of(cls, section: VAEOptimConfig, iterations: int, seed: int) -> VAETrainConfig:
        """The settings of a strategy's ``train:`` section with ``T`` and the seed resolved."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(VAEOptimConfig)},
                   iterations=iterations, seed=seed)


#: The former name of :class:`VAETrainConfig`, still importable.
TrainSettings = VAETrainConfig


@dataclass
class TrainState:
    """Everything a graph-VAE training run needs to continue.

    Attributes:
        model: The VAE being trained.
        optimizer: Its Adam optimiser.
        scheduler: The plateau learning-rate scheduler.
        settings: The optimisation settings.
        iteration: 0-based index of the current iteration (of ``settings.iterations``).
        epoch: Epochs completed in the current iteration.
        generator: Random generator for the batch order and the reparameterisation noise.
        history: One ``{"iteration", "epoch", "loss", "recon", "kld", "lr"}`` per epoch
            (per-graph averages).
    """

    model: GraphVAE
    optimizer: torch.optim.Optimizer
    scheduler: ReduceLROnPlateau
    settings: VAETrainConfig
    iteration: int = 0
    epoch: int = 0
    generator: torch.Generator = field(default_factory=torch.Generator)
    history: list[dict] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Whether every epoch of every iteration has run."""
        s = self.settings
        return self.iteration >= s.iterations - 1 and self.epoch >= s.epochs

    def state_dict(self) -> dict:
        """Checkpointable data (tensors and plain Python values only)."""
        return {
            "model_args": self.model.arguments(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "settings": asdict(self.settings),
            "iteration": self.iteration,
            "epoch": self.epoch,
            "generator": self.generator.get_state(),
            "history": list(self.history),
        }

    @staticmethod
    def from_state_dict(data: dict) -> TrainState:
        """Rebuild a state saved with :meth:`state_dict`.

        Raises:
            CheckpointError: When a key is missing or the weights do not fit the model.
        """
        try:
            settings = VAETrainConfig(**data["settings"])
            model = GraphVAE.from_arguments(data["model_args"])
            model.load_state_dict(data["model"])
            state = _fresh_optim(model, settings)
            state.optimizer.load_state_dict(data["optimizer"])
            state.scheduler.load_state_dict(data["scheduler"])
            state.iteration = int(data["iteration"])
            state.epoch = int(data["epoch"])
            state.generator.set_state(data["generator"])
            state.history = list(data["history"])
        except (KeyError, TypeError, RuntimeError, ValueError) as exc:
            raise CheckpointError(f"graph-VAE training state is incomplete or does not fit: {exc}") from None
        return state


def _fresh_optim(model: GraphVAE, settings: VAETrainConfig) -> TrainState:
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, fused=True)  # one kernel for all parameters
    scheduler = ReduceLROnPlateau(
        optimizer, mode="min", factor=settings.plateau_factor, patience=settings.plateau_patience
    )
    return TrainState(model, optimizer, scheduler, settings)


def _init_model(config: GraphVAEConfig, num_types: int, max_nodes: int, seed: int) -> GraphVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GraphVAE(config, num_types, max_nodes)


def new_state(config: GraphVAEConfig, num_types: int, max_nodes: int, settings: VAETrainConfig) -> TrainState:
    """A fresh training state: model initialised from ``settings.seed``, epoch 0 of iteration 0."""
    model = _init_model(config, num_types, max_nodes, settings.seed)
    state = _fresh_optim(model, settings)
    state.generator.manual_seed(settings.seed)
    return state


def next_iteration(state: TrainState) -> TrainState:
    """Start the next iteration (Chatzianastasis et al., 2021, Sec. 3.3): a freshly initialised model whose
    operation embeddings are the last ones of the previous iteration, with a new optimiser."""
    s = state.settings
    old = state.model
    model = _init_model(old.config, old.num_types, old.max_nodes, s.seed + 1000 * (state.iteration + 1))
    if old.ops.embedding is not None:
        with torch.no_grad():
            model.ops.embedding.weight.copy_(old.ops.embedding.weight)
    fresh = _fresh_optim(model, s)
    fresh.iteration = state.iteration + 1
    fresh.epoch = 0
    fresh.generator = state.generator
    fresh.history = state.history
    return fresh


def train_epoch(state: TrainState, data: DagDataset, on_batch: Callable[[float], None] | None = None) -> dict:
    """Run one epoch (or ``settings.max_batches`` batches) and step the scheduler.

    Args:
        state: The training state; updated in place (weights, optimiser, epoch counter).
        data: The training graphs.
        on_batch: Called with the batch's per-graph loss after every step.

    Returns:
        The epoch's per-graph ``loss``, ``recon`` and ``kld`` averages and the ``lr`` used.
    """
    if len(data) == 0:
        raise DataError("cannot train a graph VAE on an empty dataset")
    model, s = state.model, state.settings
    model.train()
    totals = {"loss": 0.0, "recon": 0.0, "kld": 0.0}
    seen = 0
    lr = state.optimizer.param_groups[0]["lr"]
    for i, (batch, _) in enumerate(data.batches(s.batch_size, shuffle=True, generator=state.generator)):
        if s.max_batches is not None and i >= s.max_batches:
            break
        state.optimizer.zero_grad(set_to_none=True)
        with precision_context(s.precision, batch.types.device):
            out = model.loss(batch, generator=state.generator)
        check_finite_loss(out["loss"], "graph-VAE training",
                          f"iteration {state.iteration + 1}, epoch {state.epoch + 1}, batch {i + 1}")
        out["loss"].backward()
        state.optimizer.step()
        for key in totals:
            totals[key] += float(out[key].detach())
        seen += len(batch)
        if on_batch is not None:
            on_batch(float(out["loss"].detach()) / len(batch))
    state.scheduler.step(totals["loss"])
    state.epoch += 1
    record = {"iteration": state.iteration, "epoch": state.epoch, "lr": lr, **{k: v / seen for k, v in totals.items()}}
    state.history.append(record)
    return record


def fit(
    state: TrainState,
    data: DagDataset,
    on_epoch: Callable[[TrainState], None] | None = None,
    description: str = "graph VAE",
) -> TrainState:
    """Train until every iteration's epochs are done, from wherever ``state`` stands.

    Args:
        state: A fresh or resumed state.
        data: The training graphs.
        on_epoch: Called after every epoch (e.g. to checkpoint ``state.state_dict()``).
        description: Progress-bar label.

    Returns:
        The final state (a new object when a later iteration started).
    """
    s = state.settings
    per_epoch = math.ceil(len(data) / s.batch_size)
    if s.max_batches is not None:
        per_epoch = min(per_epoch, s.max_batches)
    total = s.iterations * s.epochs * per_epoch
    done = (state.iteration * s.epochs + state.epoch) * per_epoch
    with progress(description, total=total, completed=done) as bar:
        while not state.done:
            if state.epoch >= s.epochs:
                state = next_iteration(state)
            train_epoch(state, data, on_batch=lambda loss: bar.advance(1, loss=loss))
            if on_epoch is not None:
                on_epoch(state)
    return state
