"""``--tensorboard DIR``: a live TensorBoard view of the runs of this process.

Every event a run logs (:meth:`RunDir.log <attnas.runs.run_dir.RunDir.log>`) is mirrored as
TensorBoard scalars under ``DIR/<run folder name>/``, while the run goes; the run
directory itself is not touched. An event's numbers become scalars tagged
``<phase>/<key>`` (losses, validation scores, candidate scores, learning rates), the
numbers of a nested mapping ``<phase>/<key>/<name>`` (a candidate's ``costs``), at the
event's ``epoch``, else ``index``, else ``round``, else a count of the phase's events
(:mod:`attnas.tracking.event_mirrors`). A resumed run repeats the steps redone after its last
checkpoint.

Needs the ``tensorboard`` package (``pip install "attnas[tensorboard]"``).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnas.core.errors import ConfigError
from attnas.tracking.event_mirrors import StepCounter, listening, stop_message


def require_tensorboard() -> None:
    """Raise a one-line :class:`ConfigError` when TensorBoard's writer cannot be imported."""
    try:
        importlib.import_module("torch.utils.tensorboard")
    except ImportError as exc:
        raise ConfigError(f"--tensorboard needs the tensorboard package ({exc}); "
                          f"pip install \"attnas[tensorboard]\"") from None


class EventMirror:
    """The listener that writes each run's events to ``log_dir/<run folder name>``.

    Args:
        log_dir: TensorBoard's log directory.
    """

    def __init__(self, log_dir: str | Path):
        self.log_dir = Path(log_dir)
        self._writers: dict[Path, Any] = {}
        self._steps = StepCounter()
        self._failed = False

    def __call__(self, run_path: Path, event: dict) -> None:
        if self._failed:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter

            writer = self._writers.get(run_path)
            if writer is None:
                writer = self._writers[run_path] = SummaryWriter(str(self.log_dir / Path(run_path).name))
            step, values = self._steps(run_path, event)
            for tag, value in values:
                writer.add_scalar(tag, value, step)
            writer.flush()
        except Exception as exc:  # noqa: BLE001 - the live view must never stop the run
            self._failed = True
            warnings.warn(stop_message("--tensorboard", exc), stacklevel=2)

    def close(self, error: BaseException | None = None) -> None:
        """Flush and close every writer (``error``, what ended the run if anything did, is not used)."""
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
    with listening(EventMirror(log_dir)) as mirror:
        yield mirror
