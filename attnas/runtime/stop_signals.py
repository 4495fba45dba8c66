"""SIGINT (Ctrl-C) and SIGTERM (what Slurm, Kubernetes and ``timeout`` send) stop a command the same way.

Inside :func:`handling_stop_signals` the first of either signal raises an exception
derived from :class:`KeyboardInterrupt` (:class:`Terminated` for SIGTERM), so a run
records ``"status": "interrupted"`` and keeps its checkpoints
(:func:`attnas.pipeline.recording_outcome`) and the command line exits with 130 (SIGINT)
or 143 (SIGTERM, 128 + 15) and the resume hint. Every later signal is ignored until the
process ends, so a second Ctrl-C pressed at once cannot interrupt the recording of the
first, print a traceback, or leave the run marked ``running``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM received: stop like Ctrl-C (exit status 143)."""

    exit_code = 143


#: Whether the current command has been stopped by a signal (later ones are ignored).
_stopping = False


def _stop(signum: int, frame: object) -> None:
    global _stopping
    if _stopping:  # a second signal while the first one is being handled
        return
    _stopping = True
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def handling_stop_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise once and are then ignored (see the module
    docstring); the handlers before it are restored after, unless a signal stopped the
    block (the process is then ending, and later signals stay ignored). Outside the main thread (where
    Python delivers no signals) it does nothing."""
    global _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    _stopping = False
    for s, handler in previous.items():
        if handler is not signal.SIG_IGN:  # a signal the process was started ignoring stays ignored
            signal.signal(s, _stop)
    try:
        yield
    finally:
        if not _stopping:  # after a stop, later signals stay ignored while the process exits
            for s, handler in previous.items():
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
