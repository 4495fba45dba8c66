"""How a command of the ``attnas`` CLI ends on an error: one line on stderr and its exit status.

The statuses (documented in :mod:`attnas.cli`): an :class:`~attnas.core.errors.AttnasError`'s
own (2 for bad input), 1 for an error attnas does not expect, 130 for Ctrl-C and 143 for
SIGTERM (:mod:`attnas.runtime.stop_signals`). ``--debug`` raises instead, with the traceback.
"""

from __future__ import annotations

import functools
import traceback

import typer

from attnas.core.errors import AttnasError
from attnas.runtime.stop_signals import Terminated, handling_stop_signals

#: Whether the current command was given ``--debug`` (set by :func:`set_debug`).
_debug = False


def fail(msg: str, code: int = 2) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no message)"


def _kept_run(exc: BaseException) -> str:
    """The hint for an exception raised after a run directory was made (see :mod:`attnas.pipeline`)."""
    run_dir = getattr(exc, "attnas_run_dir", None)
    return f"; the run is kept: `attnas search --resume {run_dir}` continues it" if run_dir else ""


#: Commands that continue a stopped run when run again with the same arguments (their
#: finished runs, rows or seeds are kept), and what they keep.
_RERUN_CONTINUES = {"compare": "rows and seeds", "sweep": "runs", "bench": "cells", "retrain": "seeds"}


def _continue_hint(command: str, exc: BaseException) -> str:
    """How to continue what ``command`` was doing when it was stopped."""
    if command in _RERUN_CONTINUES:
        return f"; the same `attnas {command}` command run again continues it (finished {_RERUN_CONTINUES[command]} are kept)"
    return _kept_run(exc) or "; a search continues with `attnas search --resume RUN_DIR`"


def guard(fn):
    """Turn every exception of a command into one line on stderr and its exit status.

    ``--debug`` raises it instead, with its traceback (a Ctrl-C prints its traceback and
    still exits with 130). SIGTERM stops the command like Ctrl-C, with status 143, and a
    second signal while the first is handled is ignored (:mod:`attnas.runtime.stop_signals`).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with handling_stop_signals():
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if _debug or is_click_exception(exc):
                    raise
                report_error(exc)
            except KeyboardInterrupt as exc:
                if _debug:
                    traceback.print_exc()
                what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
                fail(what + _continue_hint(fn.__name__, exc), getattr(exc, "exit_code", 130))

    return wrapper


def report_error(exc: Exception) -> None:
    """Print ``exc`` as one line and exit with its status: an :class:`AttnasError`'s own
    (2 for bad input), else 1 with the exception's type (an error attnas did not expect)."""
    if isinstance(exc, AttnasError):
        fail(one_line(exc) + _kept_run(exc), exc.exit_code)
    fail(f"{type(exc).__name__}: {one_line(exc)}{_kept_run(exc)} (--debug shows the traceback)", 1)


def is_click_exception(exc: BaseException) -> bool:
    """Whether ``exc`` is click's own (a usage error, ``Exit``, ``Abort``), from click or
    typer's copy of it: the command-line framework handles those."""
    return any(cls.__module__.split(".")[0] in ("click", "typer") for cls in type(exc).__mro__)


def set_debug(debug: bool) -> None:
    """Raise a command's errors with their traceback (``--debug``) instead of one line."""
    global _debug
    _debug = debug
