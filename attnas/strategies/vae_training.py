"""The graph-VAE training phase that ``graph-vae`` and ``latent-bo`` share: train, checkpoint, resume.

The training itself is :func:`attnas.graphvae.train.fit` (D-VAE's optimisation, Zhang et al.,
NeurIPS 2019; the ``T`` iterations of DVAE-EMB, Chatzianastasis et al., 2021, Sec. 3.3). This
phase keeps its :class:`~attnas.graphvae.train.TrainState` (weights, optimiser, plateau
schedule, generator, epoch and iteration counters, history) under the checkpoint tag
``vae`` as ``{"train": state, "done", "elapsed"}``, every ``every`` epochs and at the end;
a resumed run continues from the newest checkpoint exactly as the uninterrupted one and a
finished one is reloaded without training.
"""

from __future__ import annotations

from collections.abc import Callable

from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.train import TrainState, fit
from attnas.runs.resumable_phase import ResumablePhase, Slot
from attnas.runs.run_dir import RunDir

TAG = "vae"


def train_vae_phase(run: RunDir, fresh: Callable[[], TrainState], data: DagDataset, *, every: int,
                    elapsed: float = 0.0, on_epoch: Callable[[TrainState, int], None] | None = None,
                    description: str = "graph VAE") -> tuple[TrainState, float]:
    """Train (or resume training, or reload) a graph VAE under the checkpoint tag ``vae``.

    Args:
        run: The run directory.
        fresh: Builds the state of a new training (called only without a checkpoint).
        data: The training graphs.
        every: Epochs between checkpoints (counted over all iterations; the last epoch
            always checkpoints).
        elapsed: Wall seconds of the search before this phase (a checkpoint's total replaces it).
        on_epoch: Called as ``on_epoch(state, epoch)`` after every epoch, before its
            checkpoint (``epoch`` counts over all iterations, from 1), e.g. to log it.
        description: Progress-bar label.

    Returns:
        The trained state and the search's wall seconds so far.
    """
    current: list[TrainState | None] = [None]

    def load(state: dict) -> None:
        current[0] = TrainState.from_state_dict(state)

    phase = ResumablePhase(run, TAG, {"train": Slot(lambda: current[0].state_dict(), load)}, rng=False,
                           elapsed=elapsed)
    if phase.resume() and phase.done:
        return current[0], phase.elapsed
    state = current[0] if current[0] is not None else fresh()
    epochs = state.settings.epochs
    phase.start()

    def after_epoch(st: TrainState) -> None:
        epoch = st.iteration * epochs + st.epoch
        if on_epoch is not None:
            on_epoch(st, epoch)
        if st.done or epoch % every == 0:
            current[0] = st  # a later iteration trains a new state object
            phase.save(epoch, done=st.done)

    state = fit(state, data, on_epoch=after_epoch, description=description)
    return state, phase.elapsed
