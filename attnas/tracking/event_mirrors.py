"""What the live views of a run's events (``--tensorboard``, ``--mlflow``) share.

An event's numbers become scalars tagged ``<phase>/<key>`` (losses, validation scores,
candidate scores, learning rates), the numbers of a nested mapping ``<phase>/<key>/<name>``
(a candidate's ``costs``), at the event's ``epoch``, else ``index``, else ``round``, else a
count of the run's events of that phase (:func:`scalars`, :class:`StepCounter`). Keys that
say where an event is (:data:`STEP_KEYS`), booleans, strings and lists are not mirrored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from attnas.runs.run_dir import add_event_listener, remove_event_listener

#: Event keys that say where an event is, not what was measured (not mirrored as scalars).
STEP_KEYS = ("epoch", "index", "round", "step", "stage", "time")


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


class StepCounter:
    """:func:`scalars` of the events of several runs, counting each run's events per phase."""

    def __init__(self) -> None:
        self._counts: dict[tuple[Path, str], int] = {}

    def __call__(self, run_path: Path, event: dict) -> tuple[int, list[tuple[str, float]]]:
        """The step and scalars of ``event``, the next event of the run in ``run_path``."""
        key = (Path(run_path), str(event.get("phase", "event")))
        count = self._counts.get(key, 0)
        self._counts[key] = count + 1
        return scalars(event, count)


def stop_message(option: str, exc: BaseException) -> str:
    """The one-line warning of a live view that stops mirroring after ``exc``."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{option}: stopped mirroring events ({type(exc).__name__}: {text})"


class Mirror(Protocol):
    """An event listener that holds resources until :meth:`close`."""

    def __call__(self, run_path: Path, event: dict) -> None: ...

    def close(self, error: BaseException | None = None) -> None:
        """Release the mirror; ``error`` is what ended the block, if anything did."""


@contextlib.contextmanager
def listening(mirror: Mirror) -> Iterator[Mirror]:
    """Call ``mirror`` for each event of the runs of this process inside the block, then
    close it (with the exception that left the block, if one did)."""
    add_event_listener(mirror)
    error = None
    try:
        yield mirror
    except BaseException as exc:
        error = exc
        raise
    finally:
        remove_event_listener(mirror)
        mirror.close(error)
