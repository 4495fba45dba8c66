"""What the ``attnas`` CLI shows of the library's :mod:`logging` messages, on stderr."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from attnas.runtime.command_errors import fail

class _StderrHandler(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment (a test runner may swap it between commands)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(logging.Formatter("%(message)s"))


def set_verbosity(verbose: bool = False, quiet: bool = False) -> Callable[[], None]:
    """Show the ``attnas`` logger's messages on stderr: INFO and up by default, DEBUG with
    ``verbose``, WARNING and up with ``quiet`` (which also silences the progress bars) or
    when ``ATTNAS_PROGRESS=0`` silences progress output (its notices are progress too).

    Returns:
        What puts the logger back as it was (called when the command ends).
    """
    if verbose and quiet:
        fail("give --verbose or --quiet, not both")
    logger = logging.getLogger("attnas")
    level, attached = logger.level, _HANDLER in logger.handlers
    quiet = quiet or os.environ.get("ATTNAS_PROGRESS", "1") == "0"
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    logger.addHandler(_HANDLER)

    def restore() -> None:
        logger.setLevel(level)
        if not attached:
            logger.removeHandler(_HANDLER)

    return restore
