"""What a run's result depends on besides its config: the code's versions, torch's thread
count and the compiled kernels that are switched on.

``run.json`` records them when a run is created (:func:`describe`). Each can change the
numbers a search computes (CPU results are bit-identical only for the same thread count;
a compiled kernel and its eager operation agree only to float rounding), and so the
architecture it finds: ``attnas search --resume`` compares them with the resuming process
(:func:`changes`) and refuses a difference (:func:`check_resume`) unless forced. A
``run.json`` written before a field was recorded resumes without a check of that field.

Recorded fields (all but ``attnas_commit`` are compared, :data:`COMPARED`):

- ``attnas_version``: the installed distribution's version (package metadata);
- ``attnas_commit``: ``git rev-parse HEAD`` of the source checkout attnas runs from (absent
  when it runs from an installed copy or git is missing); recorded, not compared;
- ``torch``: ``torch.__version__``;
- ``torch_threads``: ``torch.get_num_threads()`` (``attnas --threads N`` sets it);
- ``kernels``: the compiled kernels switched on (``ATTNAS_NO_KERNELS=1`` turns all off,
  ``ATTNAS_DISABLE_KERNELS`` or :func:`attnas.kernels.disable` some); read from the
  registered overrides, so nothing is compiled to find out.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from attnas._version import __version__
from attnas.core.errors import RunDirError

#: The fields of ``run.json`` that a resume compares, in the order they are reported. The
#: commit is recorded but not compared: a resume after a commit of work in progress (of
#: code the run may not even use) is common, and refusing it would teach ``--force``.
COMPARED = ("torch_threads", "kernels", "torch", "attnas_version")

_SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding attnas/


def git_commit(root: Path = _SOURCE_ROOT, timeout: float = 2.0) -> str | None:
    """The commit checked out where attnas runs from, or ``None``.

    Only a source checkout counts (``root`` holds ``pyproject.toml`` and ``.git``), so an
    installed attnas inside some other repository reports nothing.

    Args:
        root: The folder above the ``attnas`` package.
        timeout: Seconds to wait for ``git``.
    """
    if not ((root / "pyproject.toml").is_file() and (root / ".git").exists()):
        return None
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and commit else None


def enabled_kernels() -> list[str]:
    """The compiled kernels switched on in this process, sorted (none when
    ``attnas.kernels`` was not imported or every kernel is off).

    Reads which kernels registered an enabled override (:mod:`attnas.ops.overrides`);
    builds nothing.
    """
    from attnas.ops import overrides

    return sorted({kernel for hook, kernel in overrides.registered().items() if overrides.active(hook)})


def describe() -> dict[str, Any]:
    """The recorded fields for this process (``attnas_commit`` only when known)."""
    import torch

    info: dict[str, Any] = {"attnas_version": __version__, "torch": torch.__version__,
                            "torch_threads": torch.get_num_threads(), "kernels": enabled_kernels()}
    commit = git_commit()
    if commit:
        info["attnas_commit"] = commit
    return info


def changes(recorded: dict, current: dict) -> dict[str, tuple[Any, Any]]:
    """The compared fields whose recorded value differs from the current one.

    A field missing on either side (an older ``run.json``, or no git checkout) is not compared.

    Returns:
        ``{field: (recorded, current)}``, in the order of :data:`COMPARED`.
    """
    return {key: (recorded[key], current[key]) for key in COMPARED
            if key in recorded and key in current and recorded[key] != current[key]}


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "none"
    return str(value)


def check_resume(path: Path, recorded: dict, current: dict, force: bool = False) -> dict[str, Any]:
    """Refuse to resume a run in a process that differs from the one that made it.

    Args:
        path: The run directory (for the message).
        recorded: Its ``run.json``.
        current: :func:`describe` of this process.
        force: Resume anyway; the differences are then returned for the record.

    Returns:
        The fields to merge into ``run.json`` on resume: the current values, and with
        ``force`` a ``forced_resumes`` list that gains ``{"time", "changes"}``.

    Raises:
        RunDirError: One line naming each differing field with both values.
    """
    changed = changes(recorded, current)
    update: dict[str, Any] = dict(current)
    if not changed:
        return update
    if not force:
        what = "; ".join(f"{key}: the run was made with {_show(old)}, this process has {_show(new)}"
                         for key, (old, new) in changed.items())
        raise RunDirError(f"{path}: {what}; resuming would change the result (`attnas search --resume {path} "
                          "--force` resumes anyway)")
    update["forced_resumes"] = [*recorded.get("forced_resumes", []),
                                {"time": time.time(), "changes": {k: list(v) for k, v in changed.items()}}]
    return update
