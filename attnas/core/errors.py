"""User-facing errors.

Every error a user can cause (a bad recipe, an unknown operation name, a corrupt
checkpoint, a dataset of the wrong shape) is raised as a subclass of
:class:`AttnasError` with a message that names the problem. The command line prints
the message on one line and exits with the error's :attr:`~AttnasError.exit_code` (2 for
bad input; 1 for :class:`TrainingError` and :class:`WorkerError`, failures during the
run); the Python API lets it propagate.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable


class AttnasError(Exception):
    """Base class of all errors that attnas reports to users.

    Attributes:
        exit_code: The command line's exit status for this error: 2 (bad input, found
            before anything is written) unless a subclass says otherwise.
    """

    exit_code: int = 2


class ConfigError(AttnasError, ValueError):
    """A recipe, a ``--set`` override or a component option is invalid."""


class ArchError(AttnasError, ValueError):
    """An architecture document is malformed or violates its space."""


class DataError(AttnasError, ValueError):
    """A dataset is missing, incomplete or malformed."""


class CheckpointError(AttnasError):
    """A checkpoint is missing, truncated or corrupt."""


class RunDirError(AttnasError):
    """A run directory cannot be created, written, locked or resumed."""


class TrainingError(AttnasError):
    """Training diverged (the loss became NaN or infinite): a failure during the run (exit status 1)."""

    exit_code = 1


class WorkerError(AttnasError):
    """A parallel worker failed for good (a Ray worker died on every try): a failure during
    the run (exit status 1); what finished before it is kept, so the command can be run again."""

    exit_code = 1


class UnsupportedError(AttnasError):
    """A strategy was asked to drive a space that lacks what it needs."""


#: What :func:`check_finite_loss` suggests by default.
DIVERGED_HINT = "lower the learning rate or clip gradients (grad_clip)"


def check_finite_loss(loss: float | object, phase: str, step: str | int, hint: str = DIVERGED_HINT) -> float:
    """The loss as a float, or a :class:`TrainingError` naming the phase and step where it is NaN or infinite.

    The one check of every training loop's loss (final training, supernet training, DARTS
    phases, graph VAEs and their GPs, pruning fine-tunes), called before ``backward()`` so
    that no weight is updated from it and the last checkpoint stays good: the run stops
    with exit status 1 and can be resumed (after lowering the learning rate, say).

    Args:
        loss: A scalar tensor (converted with ``float``) or a number.
        phase: The phase, as the event log names it (``"supernet"``, ``"final"``, ...).
        step: Where in the phase, e.g. ``"epoch 3, batch 7"``; an integer is a step number.
        hint: What to try instead.

    Returns:
        ``float(loss)``.

    Raises:
        TrainingError: ``<phase>: the training loss became nan at <step>; <hint>``.
    """
    value = float(loss.detach() if hasattr(loss, "detach") else loss)
    if not math.isfinite(value):
        where = step if isinstance(step, str) else f"step {step}"
        raise TrainingError(f"{phase}: the training loss became {value} at {where}; {hint}")
    return value


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return a ``" (did you mean 'x'?)"`` hint, or an empty string.

    Args:
        name: The name the user gave.
        choices: The valid names.
    """
    choices = list(choices)
    same_letters = [c for c in choices if str(c).lower() == str(name).lower()]
    close = same_letters or difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> str:
    """Format the message for an unknown ``kind`` called ``name``.

    Args:
        kind: What was looked up, e.g. ``"operation"``.
        name: The name that was not found.
        choices: The valid names, listed in the message.
    """
    choices = sorted(choices)
    return (
        f"unknown {kind} '{name}'{did_you_mean(name, choices)}; "
        f"valid choices: {', '.join(choices) if choices else '(none registered)'}"
    )
