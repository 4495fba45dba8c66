"""The run directory: everything a search writes, written so that a crash loses nothing.

Layout::

    RUN_DIR/
      config.yaml        the resolved RunConfig
      run.json           runtime facts: attnas version, data root, command, status
      events.jsonl       one JSON line per step / candidate / epoch
      checkpoints/       <tag>-<step>.ckpt, checksummed, the newest two kept per tag
      arch.json          the found architecture
      metrics.json       flat JSON object (val_accuracy, test_accuracy, ...)
      model.pt           the final model: a plain torch.save of its state_dict and what rebuilds it
                         without the data (attnas.runs.model_files)
      model.pt.sha256    its SHA-256, checked on every load
      report.md, *.png   written by ``attnas report``

Every file is written to a temporary name in the same folder, flushed, fsynced and
renamed over the target, so a reader sees either the old or the new file, never half
of one (:mod:`attnas.runs.atomic_files`). Checkpoints carry a SHA-256 of their payload
(:mod:`attnas.runs.checkpoint_files`); a truncated or corrupt one is detected on load and the
previous good one is used, with a warning. A lock file keeps
two processes from writing one run directory. A run directory is created only in a new
or empty folder, so no file that was there before is read as part of the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from attnas.core.errors import CheckpointError, RunDirError
from attnas.core.text_files import read_text
from attnas.runs.atomic_files import atomic_write_bytes, atomic_write_json, atomic_write_text, json_default
from attnas.runs.checkpoint_files import checkpoint_events_offset, load_checkpoint_file, save_checkpoint_file

_KEEP = 2

#: Called as ``listener(run_path, event)`` after every event a run logs in this process
#: (e.g. :mod:`attnas.tracking.tensorboard_mirror`, :mod:`attnas.tracking.mlflow_mirror`); see
#: :func:`add_event_listener`.
_event_listeners: list[Callable[[Path, dict], None]] = []


def add_event_listener(listener: Callable[[Path, dict], None]) -> None:
    """Call ``listener(run_path, event)`` after each event any run logs in this process
    (the event as written to ``events.jsonl``, with its ``time``)."""
    _event_listeners.append(listener)


def remove_event_listener(listener: Callable[[Path, dict], None]) -> None:
    """Stop calling ``listener`` (a listener not added is ignored)."""
    if listener in _event_listeners:
        _event_listeners.remove(listener)


def run_folder_name(name: str, limit: int = 100) -> str:
    """``name`` (a recipe's) as one safe folder name, for default run directories.

    Runs of characters other than letters, digits, ``.``, ``_`` and ``-`` become one
    ``-`` and leading or trailing dots and dashes are dropped, so the result has no path
    separator and is neither ``.`` nor ``..``: it stays inside the folder it is joined to.

    Args:
        name: Any string.
        limit: Longest result, in characters.

    Returns:
        The folder name (``run`` when nothing usable is left).

    Example:
        >>> run_folder_name("../../etc/x y")
        'etc-x-y'
    """
    safe = re.sub(r"[^\w.-]+", "-", name)[:limit].strip(".-")
    return safe or "run"


_fault_counts: dict[str, int] = {}


def maybe_inject_fault(event: dict) -> None:
    """Fault injection for tests: ``ATTNAS_FAULT=<phase>:<n>`` SIGKILLs this process
    right after the n-th event of ``phase`` is logged (a real, unclean death)."""
    spec = os.environ.get("ATTNAS_FAULT")
    if not spec:
        return
    phase, _, n = spec.partition(":")
    if event.get("phase") != phase:
        return
    _fault_counts[phase] = _fault_counts.get(phase, 0) + 1
    if _fault_counts[phase] >= int(n or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def read_jsonl(path: Path) -> list[dict]:
    """The JSON lines of ``path`` (none if it does not exist), skipping lines cut by a kill."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class RunDir:
    """A run directory (see the module docstring for its layout).

    Args:
        path: The folder.
    """

    CONFIG = "config.yaml"
    RUN = "run.json"
    EVENTS = "events.jsonl"
    ARCH = "arch.json"
    METRICS = "metrics.json"
    MODEL = "model.pt"

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser().resolve()
        self._lock_fh = None
        self._events_fh = None

    # ------------------------------------------------------------------ creation and locking

    @staticmethod
    def check_writable(path: str | os.PathLike) -> None:
        """Fail early, before any work, if ``path`` cannot be created and written.

        Probes the folder itself when it exists, else its nearest existing ancestor (by
        creating and removing a temporary folder there), so nothing is left behind.
        """
        path = Path(path).expanduser().absolute()
        probe_in = path
        while not probe_in.exists() and probe_in.parent != probe_in:
            probe_in = probe_in.parent
        if not probe_in.is_dir():
            raise RunDirError(f"run directory {path} is not writable: {probe_in} is not a folder")
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".attnas-write-probe-", dir=probe_in))
        except OSError as exc:
            raise RunDirError(f"run directory {path} is not writable: {exc.strerror or exc} "
                              f"(in {probe_in})") from None

    @classmethod
    def check_new(cls, path: str | os.PathLike) -> None:
        """Fail early, before any work, unless ``path`` can become a new run directory.

        It must not exist yet, or be an empty folder, and be writable. A folder holding
        other files is refused, so that nothing in it (e.g. a stale ``metrics.json``) is
        taken for part of the new run.

        Raises:
            RunDirError: If the folder holds a run or other files, or cannot be written.
        """
        path = Path(path).expanduser()
        if (path / cls.CONFIG).exists():
            raise RunDirError(
                f"{path} already holds a run; use `attnas search --resume {path}` to continue it "
                "or --out to choose another folder"
            )
        if path.is_dir() and any(path.iterdir()):
            raise RunDirError(f"{path} is not empty and holds no attnas run; choose a new or empty folder "
                              "with --out")
        cls.check_writable(path)

    @classmethod
    def create(cls, path: str | os.PathLike, config_yaml: str, run_info: dict) -> RunDir:
        """Create a fresh run directory holding ``config_yaml`` (a new or empty folder).

        Raises:
            RunDirError: If the folder already holds a run or other files, or cannot be written.
        """
        path = Path(path).expanduser()
        cls.check_new(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"run directory {path} is not writable: {exc.strerror or exc}") from None
        run = cls(path)
        run.lock()
        (run.path / "checkpoints").mkdir(exist_ok=True)
        atomic_write_text(run.path / cls.CONFIG, config_yaml)
        atomic_write_json(run.path / cls.RUN, {**run_info, "status": "running", "created": time.time()})
        if not (run.path / cls.EVENTS).exists():
            atomic_write_bytes(run.path / cls.EVENTS, b"")
        return run

    @classmethod
    def open(cls, path: str | os.PathLike) -> RunDir:
        """Open an existing run directory (for resume, retrain, evaluate, report)."""
        path = Path(path).expanduser()
        if not path.is_dir():
            raise RunDirError(f"{path} is not a run directory (folder does not exist)")
        if not (path / cls.CONFIG).exists():
            raise RunDirError(f"{path} is not a run directory (no {cls.CONFIG})")
        return cls(path)

    def lock(self) -> None:
        """Take the run's exclusive lock; fails if another process holds it."""
        if self._lock_fh is not None:
            return
        try:
            fh = open(self.path / ".lock", "a+")
        except OSError as exc:
            raise RunDirError(f"run directory {self.path} is not writable: {exc.strerror}") from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise RunDirError(f"{self.path} is in use by another attnas process") from None
        self._lock_fh = fh

    def close(self) -> None:
        """Release the lock and close the event log."""
        if self._events_fh is not None:
            self._events_fh.close()
            self._events_fh = None
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ files

    def file(self, name: str) -> Path:
        """Path of a file in the run directory."""
        return self.path / name

    def exists(self, name: str) -> bool:
        """Whether a file of the run exists."""
        return (self.path / name).exists()

    def read_config_yaml(self) -> dict:
        """The resolved config as plain data."""
        from attnas.config.yaml_loading import load_yaml

        path = self.path / self.CONFIG
        try:
            data = load_yaml(read_text(path, str(path), RunDirError), str(path))
        except yaml.YAMLError as exc:
            raise RunDirError(f"{path} is not valid YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(data, dict):
            raise RunDirError(f"{path} does not hold a run's config (a YAML mapping), it holds "
                              f"{'nothing' if data is None else type(data).__name__}")
        return data

    def read_json(self, name: str) -> Any:
        """Read a JSON file of the run."""
        p = self.path / name
        try:
            return json.loads(p.read_text())
        except FileNotFoundError:
            raise RunDirError(f"{p} does not exist") from None
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, RecursionError) as exc:  # an integer of more than 4,300 digits, deep nesting
            raise RunDirError(f"{p} is not valid JSON ({str(exc).split(';')[0] or type(exc).__name__})") from None

    def write_json(self, name: str, obj: Any) -> None:
        """Write a JSON file of the run atomically."""
        atomic_write_json(self.path / name, obj)

    def write_text(self, name: str, text: str) -> None:
        """Write a text file of the run atomically."""
        atomic_write_text(self.path / name, text)

    def update_run_info(self, **fields: Any) -> None:
        """Merge ``fields`` into run.json."""
        info = self.read_json(self.RUN) if self.exists(self.RUN) else {}
        info.update(fields)
        self.write_json(self.RUN, info)

    # ------------------------------------------------------------------ events

    def log(self, event: dict) -> None:
        """Append one event (a JSON object) to events.jsonl."""
        if self._events_fh is None:
            self._events_fh = open(self.path / self.EVENTS, "a", encoding="utf-8")
        line = json.dumps({"time": round(time.time(), 3), **event}, default=json_default)
        self._events_fh.write(line + "\n")
        self._events_fh.flush()
        if _event_listeners:
            logged = json.loads(line)
            for listener in list(_event_listeners):
                listener(self.path, logged)
        maybe_inject_fault(event)

    def events_offset(self) -> int:
        """Byte length of events.jsonl (stored in checkpoints, restored on resume)."""
        if self._events_fh is not None:
            self._events_fh.flush()
            os.fsync(self._events_fh.fileno())
        p = self.path / self.EVENTS
        return p.stat().st_size if p.exists() else 0

    def truncate_events(self, offset: int) -> None:
        """Drop events written after ``offset`` (those of work that will be redone)."""
        if self._events_fh is not None:
            self._events_fh.close()
            self._events_fh = None
        p = self.path / self.EVENTS
        if p.exists() and p.stat().st_size > offset:
            with open(p, "r+b") as fh:
                fh.truncate(offset)

    def events(self, phase: str | None = None) -> list[dict]:
        """Read events, skipping a torn last line; optionally of one phase."""
        return [ev for ev in read_jsonl(self.path / self.EVENTS) if phase is None or ev.get("phase") == phase]

    # ------------------------------------------------------------------ checkpoints

    @property
    def checkpoint_dir(self) -> Path:
        """Folder of the checkpoints."""
        return self.path / "checkpoints"

    def _ckpts(self, tag: str) -> list[tuple[int, Path]]:
        pat = re.compile(rf"^{re.escape(tag)}-(\d+)\.ckpt$")
        found = []
        if self.checkpoint_dir.exists():
            for p in self.checkpoint_dir.iterdir():
                m = pat.match(p.name)
                if m:
                    found.append((int(m.group(1)), p))
        return sorted(found)

    def save_checkpoint(self, tag: str, step: int, state: dict) -> Path:
        """Save ``state`` as checkpoint ``tag`` at ``step``; keeps the newest two of the tag.

        The current events.jsonl length is stored with it, so a resume can drop the
        events of work done after the checkpoint (:meth:`rewind_events`).
        """
        self.checkpoint_dir.mkdir(exist_ok=True)
        path = self.checkpoint_dir / f"{tag}-{step:08d}.ckpt"
        save_checkpoint_file(path, {"step": step, "state": state}, events_offset=self.events_offset())
        for _, old in self._ckpts(tag)[:-_KEEP]:
            old.unlink(missing_ok=True)
        return path

    def has_checkpoint(self, tag: str) -> bool:
        """Whether any checkpoint file of ``tag`` exists (good or not)."""
        return bool(self._ckpts(tag))

    def load_checkpoint(self, tag: str) -> dict | None:
        """The newest good checkpoint of ``tag`` (``None`` if there is none).

        A corrupt newest checkpoint is skipped with a warning and the previous one used.

        Returns:
            ``{"step": int, "state": dict}`` or ``None``.
        """
        for step, path in reversed(self._ckpts(tag)):
            try:
                ckpt = load_checkpoint_file(path)
            except CheckpointError as exc:
                warnings.warn(f"{exc}; falling back to the previous checkpoint", stacklevel=2)
                continue
            return {"step": step, "state": ckpt["state"]}
        return None

    def rewind_events(self) -> None:
        """Before resuming: drop the events logged after the newest good checkpoint of any tag.

        Work after that checkpoint is redone, so its events would otherwise appear twice.
        With no good checkpoint at all, every event is dropped.
        """
        offset = 0
        for p in self.checkpoint_dir.glob("*.ckpt") if self.checkpoint_dir.exists() else ():
            if p.name.startswith("."):  # the temporary file of a write that a kill cut short
                continue
            try:
                offset = max(offset, checkpoint_events_offset(p))
            except CheckpointError:
                continue
        self.truncate_events(offset)

    def remove_stale_temporaries(self, *folders: str | os.PathLike) -> list[str]:
        """Remove the temporary files of writes that a kill cut short (``.<name>.tmp-<pid>...``).

        Call with the lock held: no other process writes the run then, so every such file is
        a leftover (the file it was to replace is whole, or absent).

        Args:
            folders: Folders of the run to clean besides its top folder and ``checkpoints/``
                (e.g. a retrain's results folder).

        Returns:
            The removed files' names.
        """
        removed = []
        for folder in (self.path, self.checkpoint_dir, *map(Path, folders)):
            for p in folder.glob(".*.tmp-*") if folder.is_dir() else ():
                if p.is_file():
                    p.unlink(missing_ok=True)
                    removed.append(p.name)
        return removed

    def clear_checkpoints(self, tag: str) -> None:
        """Remove every checkpoint of ``tag`` (after its phase is finished for good)."""
        for _, p in self._ckpts(tag):
            p.unlink(missing_ok=True)
