"""Progress bars for long work (rich on a terminal, periodic log lines elsewhere).

Set ``ATTNAS_PROGRESS=0`` to silence them (tests do); they are silent too when the ``attnas``
logger's own level is set above INFO (``attnas --quiet``, or
``logging.getLogger("attnas").setLevel(logging.WARNING)``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from collections.abc import Iterator

#: What the work in progress belongs to (e.g. a comparison's row and seed), put before every
#: progress line's description (:func:`labelled`).
_LABEL: ContextVar[str] = ContextVar("attnas_progress_label", default="")


class _LineProgress:
    """Fallback for non-terminals: one line at most every ``every`` seconds and at the end."""

    def __init__(self, description: str, total: int, every: float = 10.0):
        self.description, self.total, self.every = description, total, every
        self.done = 0
        self.fields: dict = {}
        self._last = time.time()

    def advance(self, n: int = 1, **fields) -> None:
        self.done += n
        self.fields.update(fields)
        now = time.time()
        if now - self._last >= self.every or self.done >= self.total:
            extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.fields.items())
            print(f"{self.description}: {self.done}/{self.total} {extra}", file=sys.stderr, flush=True)
            self._last = now


class _RichProgress:
    def __init__(self, progress, task_id):
        self._p, self._id = progress, task_id

    def advance(self, n: int = 1, **fields) -> None:
        info = " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
        self._p.update(self._id, advance=n, info=info)


class _Silent:
    def advance(self, n: int = 1, **fields) -> None:
        pass


def enabled() -> bool:
    """Whether progress output is on: ``ATTNAS_PROGRESS`` is not ``0`` and the ``attnas`` logger's
    own level (unset for a library user who has not configured logging) is not above INFO."""
    return os.environ.get("ATTNAS_PROGRESS", "1") != "0" and logging.getLogger("attnas").level <= logging.INFO


@contextmanager
def labelled(label: str) -> Iterator[None]:
    """Within this block every progress bar's description starts with ``label`` (e.g.
    ``compare row random, search seed 1``), after any label of an enclosing block."""
    outer = _LABEL.get()
    token = _LABEL.set(f"{outer}, {label}" if outer else label)
    try:
        yield
    finally:
        _LABEL.reset(token)


def current_label() -> str:
    """The label of the enclosing :func:`labelled` blocks (``""`` outside any)."""
    return _LABEL.get()


@contextmanager
def progress(description: str, total: int, completed: int = 0) -> Iterator:
    """A progress bar for ``total`` units of work; call ``.advance(n, **fields)``.

    Args:
        description: What is being done (after the label of any enclosing :func:`labelled`).
        total: Units of work.
        completed: Units already done (a resumed run starts part-way).
    """
    if _LABEL.get():
        description = f"{_LABEL.get()}: {description}"
    if not enabled():
        yield _Silent()
        return
    if not sys.stderr.isatty():
        bar = _LineProgress(description, total)
        bar.done = completed
        yield bar
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        transient=False,
    ) as p:
        tid = p.add_task(description, total=total, completed=completed, info="")
        yield _RichProgress(p, tid)
