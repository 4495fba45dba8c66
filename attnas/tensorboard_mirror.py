"""``--tensorboard DIR``: a live TensorBoard view of the runs of this process.

Every event a run logs (:meth:`RunDir.log <attnas.runs.RunDir.log>`) is mirrored as
TensorBoard scalars under ``DIR/<run folder name>/``, while the run goes; the run
directory itself is not touched. An event's numbers become scalars tagged
``<phase>/<key>`` (losses, validation scores, candidate scores, learning rates), the
numbers of a nested mapping ``<phase>/<key>/<name>`` (a candidate's ``costs``), at the
event's ``epoch``, else ``index``, else ``round``, else a count of the phase's events.
A resumed run repeats the steps redone after its last checkpoint.

Needs the ``tensorboard`` package (``pip install "attnas[tensorboard]"``).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnas.errors import ConfigError
from attnas.runs import add_event_listener, remove_event_listener

#: Event keys that say where an event is, not what was measured (not mirrored as scalars).
STEP_KEYS = ("epoch", "index", "round", "step", "stage", "time")


def require_tensorboard() -> None:
    """Raise a one-line :class:`ConfigError` when TensorBoard's writer cannot be imported."""
    try:
        importlib.import_module("torch.utils.tensorboard")
    except ImportError as exc:
        raise ConfigError(f"--tensorboard needs the tensorboard package ({exc}); "
                          f"pip install \"attnas[tensorboard]\"") from None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def scalars(event: dict, count: int) -> tuple[int, list[tuple[str, float]]]:
    """The step and the ``(tag, value)`` scalars of one event (see the module docstring).

    Args:
        event: The event as logged (with its ``phase``).
        count: How many events of its phase came before it (the step when it names none).
    """
    phase = str(event.get("phase", "event"))
    step = next((int(event[k]) for k in ("epoch", "index", "round") if _is_number(event.get(k))), count)
    out = []
    for key, value in event.items():
        if key in STEP_KEYS or key == "phase":
            continue
        if _is_number(value):
            out.append((f"{phase}/{key}", float(value)))
        elif isinstance(value, dict):
            out += [(f"{phase}/{key}/{k}", float(v)) for k, v in value.items() if _is_number(v)]
    return step, out


class EventMirror:
    """The listener that writes each run's events to ``log_dir/<run folder name>``.

    Args:
        log_dir: TensorBoard's log directory.
    """

    def __init__(self, log_dir: str | Path):
        self.log_dir = Path(log_dir)
        self._writers: dict[Path, Any] = {}
        self._counts: dict[tuple[Path, str], int] = {}
        self._failed = False

    def __call__(self, run_path: Path, event: dict) -> None:
        if self._failed:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter

            writer = self._writers.get(run_path)
            if writer is None:
                writer = self._writers[run_path] = SummaryWriter(str(self.log_dir / Path(run_path).name))
            phase = str(event.get("phase", "event"))
            count = self._counts.get((run_path, phase), 0)
            self._counts[(run_path, phase)] = count + 1
            step, values = scalars(event, count)
            for tag, value in values:
                writer.add_scalar(tag, value, step)
            writer.flush()
        except Exception as exc:  # noqa: BLE001 - the live view must never stop the run
            self._failed = True
            warnings.warn(f"--tensorboard: stopped mirroring events ({type(exc).__name__}: {exc})", stacklevel=2)

    def close(self) -> None:
        """Flush and close every writer."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()


@contextlib.contextmanager
def mirroring(log_dir: str | Path | None) -> Iterator[EventMirror | None]:
    """Mirror the events of the runs of this process to ``log_dir`` inside the block
    (``None``: do nothing).

    Raises:
        ConfigError: When the tensorboard package is missing (before anything runs).
    """
    if log_dir is None:
        yield None
        return
    require_tensorboard()
    mirror = EventMirror(log_dir)
    add_event_listener(mirror)
    try:
        yield mirror
    finally:
        remove_event_listener(mirror)
        mirror.close()
