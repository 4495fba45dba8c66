"""One resumable phase of a run: what a loop checkpoints under a tag and restores on resume.

Every long loop of a search (training a model, a supernet, a graph VAE, a bilevel DARTS
phase, pruning, Bayesian optimisation) keeps the same things between steps: modules,
optimisers, schedules, ``torch.Generator`` batch orders, the global random generators
(:mod:`attnas.runs.rng`), the wall time spent so far, the step reached and whether the phase is
finished. A :class:`ResumablePhase` holds them under one checkpoint tag of the run
directory (:meth:`attnas.runs.run_dir.RunDir.save_checkpoint`: checksummed, written atomically,
the newest two kept), saves them in one call and restores them bit for bit, so a killed
run continues exactly as the uninterrupted one (docs/developing.md, "Writing a strategy")::

    phase = ResumablePhase(run, "my-phase", {"model": model, "optimizer": opt, "generator": gen})
    if phase.resume() and phase.done:
        return                                  # finished before: weights and RNG restored
    for epoch in phase.steps(epochs):           # from the step after the checkpoint's
        ...
        phase.save(epoch, done=epoch == epochs, history=history)

A checkpoint is a flat dict: each tracked object's state under its name, the global RNG
states under ``rng``, the wall time under ``elapsed_key``, the done flag under
``done_key`` and the loop's own plain data (:meth:`save`'s keywords, :attr:`data` on
resume). The key names are the phase's to choose, so a loop keeps the layout its
checkpoints always had and the checkpoints of finished runs still load.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from attnas.core.errors import CheckpointError
from attnas.runs.rng import rng_state, set_rng_state


@dataclass
class Slot:
    """State a phase tracks that is not a module, optimiser, schedule or generator.

    Attributes:
        get: Returns the state to save (tensors and plain data only; ``None``: nothing yet).
        set: Restores a state ``get`` returned (never called with ``None``).
        merge: ``get`` returns a dict whose keys go to the top level of the checkpoint (and
            ``set`` receives the whole checkpoint state), for a layout without a key of its own.
    """

    get: Callable[[], Any]
    set: Callable[[Any], None]
    merge: bool = False


def capture(obj: Any) -> Any:
    """The checkpointable state of ``obj`` (``None`` for ``None``)."""
    if obj is None:
        return None
    if isinstance(obj, Slot):
        return obj.get()
    if isinstance(obj, torch.Generator):
        return obj.get_state()
    return obj.state_dict()


def restore(obj: Any, state: Any) -> None:
    """Load ``state`` (from :func:`capture`) into ``obj``."""
    if isinstance(obj, Slot):
        obj.set(state)
    elif isinstance(obj, torch.Generator):
        obj.set_state(state)
    else:
        obj.load_state_dict(state)


class ResumablePhase:
    """The state of one resumable loop, saved and restored under a checkpoint tag.

    Args:
        run: The run directory (``None``: nothing is saved and nothing resumed).
        tag: The checkpoint tag.
        objects: ``{name: object}`` to save and restore: modules, optimisers, schedules
            (anything with ``state_dict``/``load_state_dict``), ``torch.Generator`` objects and
            :class:`Slot` objects; ``None`` values are saved as ``None`` and never restored.
        py_rng: A ``random.Random`` whose state goes into ``rng`` with the global ones.
        rng: Whether the global RNG states (Python, NumPy, torch) are saved and restored.
        elapsed: Wall seconds spent before this phase began (a search's running total);
            a checkpoint's value replaces it on resume.
        elapsed_key: Checkpoint key of the wall time (``None``: not saved).
        done_key: Checkpoint key of the done flag (``None``: not saved).
        when_done: The names of ``objects`` a checkpoint with ``done`` set keeps (``None``:
            all); a finished phase needs its weights, not its optimiser.

    Attributes:
        step: The step of the loaded or last saved checkpoint (0: none), then the step
            :meth:`steps` is at.
        done: Whether the loaded or last saved checkpoint marks the phase finished.
        loaded: Whether :meth:`load` found a checkpoint.
        data: The loaded checkpoint's whole state (the loop's own keys with the rest).
    """

    def __init__(self, run: Any, tag: str, objects: dict[str, Any] | None = None, *,
                 py_rng: random.Random | None = None, rng: bool = True, elapsed: float = 0.0,
                 elapsed_key: str | None = "elapsed", done_key: str | None = "done",
                 when_done: tuple[str, ...] | None = None):
        self.run, self.tag = run, tag
        self.objects: dict[str, Any] = dict(objects or {})
        self.py_rng, self.rng = py_rng, rng
        self.elapsed_key, self.done_key, self.when_done = elapsed_key, done_key, when_done
        self.step = 0
        self.done = False
        self.data: dict = {}
        self.loaded = False
        self._elapsed = float(elapsed)
        self._t0: float | None = None

    # ------------------------------------------------------------------ objects

    def track(self, **objects: Any) -> None:
        """Add (or replace) objects to save and restore."""
        self.objects.update(objects)

    # ------------------------------------------------------------------ time

    @property
    def elapsed(self) -> float:
        """Wall seconds so far (before this phase, in earlier processes and since :meth:`start`)."""
        return self._elapsed if self._t0 is None else time.time() - self._t0

    @elapsed.setter
    def elapsed(self, seconds: float) -> None:
        running = self._t0 is not None
        self._elapsed, self._t0 = float(seconds), None
        if running:
            self.start()

    def start(self) -> None:
        """Start the clock from :attr:`elapsed` (when it is not running already)."""
        if self._t0 is None:
            self._t0 = time.time() - self._elapsed

    # ------------------------------------------------------------------ resume

    def load(self) -> bool:
        """Read the newest good checkpoint of the tag (restoring nothing yet); whether there is one.

        Sets :attr:`loaded`, :attr:`step`, :attr:`done`, :attr:`data` (the checkpoint's whole
        state) and :attr:`elapsed`. Without a run directory there is never one.
        """
        ck = self.run.load_checkpoint(self.tag) if self.run is not None else None
        if ck is None:
            return False
        state = ck["state"]
        if not isinstance(state, dict):
            raise CheckpointError(f"checkpoint '{self.tag}' of {self.run.path} holds no state dict")
        self.data, self.step, self.loaded = state, int(ck["step"]), True
        self.done = bool(state.get(self.done_key, False)) if self.done_key else False
        if self.elapsed_key and self.elapsed_key in state:
            self._elapsed, self._t0 = float(state[self.elapsed_key]), None
        return True

    def restore(self) -> None:
        """Restore the tracked objects and the RNGs from the loaded checkpoint.

        An object the checkpoint does not hold (or holds as ``None``) is left as it is;
        without a loaded checkpoint nothing happens.

        Raises:
            CheckpointError: When a state does not fit its object.
        """
        if not self.loaded:
            return
        state = self.data
        for name, obj in self.objects.items():
            merged = isinstance(obj, Slot) and obj.merge
            value = state if merged else state.get(name)
            if obj is None or value is None:
                continue
            try:
                restore(obj, value)
            except (KeyError, RuntimeError, ValueError, TypeError) as exc:
                why = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                why = why if len(why) <= 300 else why[:297] + "..."
                raise CheckpointError(f"checkpoint '{self.tag}' of {self.run.path}: '{name}' does not fit this "
                                      f"run ({type(exc).__name__}: {why})") from None
        if self.rng and "rng" in state:
            set_rng_state(state["rng"], self.py_rng)

    def resume(self) -> bool:
        """:meth:`load` and :meth:`restore` everything; whether a checkpoint was found."""
        found = self.load()
        self.restore()
        return found

    # ------------------------------------------------------------------ save

    def state(self, done: bool = False, **extra: Any) -> dict:
        """The checkpoint state now: the objects, the RNGs, the time, ``done`` and ``extra``."""
        state: dict = {}
        if self.done_key:
            state[self.done_key] = done
        for name, obj in self.objects.items():
            if done and self.when_done is not None and name not in self.when_done:
                continue
            if isinstance(obj, Slot) and obj.merge:
                state.update(obj.get())
            else:
                state[name] = capture(obj)
        if self.rng:
            state["rng"] = rng_state(self.py_rng)
        if self.elapsed_key:
            state[self.elapsed_key] = self.elapsed
        state.update(extra)
        return state

    def save(self, step: int, done: bool = False, **extra: Any) -> None:
        """Checkpoint the phase at ``step`` (plain data ``extra`` beside the objects).

        Without a run directory this only records ``step`` and ``done``.
        """
        self.step, self.done = step, done
        if self.run is not None:
            self.run.save_checkpoint(self.tag, step, self.state(done, **extra))

    # ------------------------------------------------------------------ iteration

    def steps(self, total: int) -> Iterator[int]:
        """``step + 1, ..., total`` (the steps left), starting the clock; :attr:`step` follows."""
        self.start()
        for step in range(self.step + 1, total + 1):
            self.step = step
            yield step
