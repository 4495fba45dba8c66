"""``--mlflow URI``: a live MLflow view of the runs of this process.

Every event a run logs (:meth:`RunDir.log <attnas.runs.run_dir.RunDir.log>`) is mirrored as
MLflow metrics while the run goes; the run directory itself is not touched. Each run
folder gets one MLflow run, named after the folder and tagged ``attnas.run_dir`` (its
absolute path), in the experiment ``--mlflow-experiment`` (default ``attnas``, made when
missing) of the tracking server or store at ``URI`` (``http://host:5000``,
``databricks``, ``file:./mlruns``, ...). ``attnas search --resume`` continues the MLflow
run of its folder, repeating the steps redone after the last checkpoint. The MLflow run
ends ``FINISHED``, ``FAILED`` (the command failed) or ``KILLED`` (Ctrl-C).

The metrics are those of ``--tensorboard`` (:mod:`attnas.tracking.event_mirrors`: the same tags at
the same steps, the event's ``time`` as timestamp) with the tag made a valid MLflow key
(:func:`metric_key`). They are sent from a background thread, in batches
(``MlflowClient.log_batch``), so a slow or unreachable server never holds the search up
(MLflow retries a failed request for minutes). When MLflow fails, one warning says so and
mirroring stops; the run goes on. When the command ends it waits up to
:data:`FLUSH_SECONDS` for the metrics still queued, then warns if some were not sent.

MLflow 3 refuses a ``file:`` store unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set (it
prefers a database such as ``sqlite:///mlflow.db``, which needs the full ``mlflow``
package); such a refusal, and a URI MLflow cannot use, is a one-line error before
anything runs.

Needs the ``mlflow-skinny`` (or ``mlflow``) package (``pip install "attnas[mlflow]"``).
"""

from __future__ import annotations

import contextlib
import importlib
import queue
import re
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnas.core.errors import ConfigError
from attnas.tracking.event_mirrors import StepCounter, listening, stop_message

#: Longest metric key MLflow takes.
MAX_KEY_LENGTH = 250
#: MLflow's limit of metrics per ``log_batch`` call.
MAX_BATCH = 1000
#: Seconds the end of a command waits for the metrics still queued.
FLUSH_SECONDS = 30.0
#: The tag that ties an MLflow run to its run folder (its absolute path).
RUN_DIR_TAG = "attnas.run_dir"
#: Every character a key keeps; the others become ``_``.
_BAD_KEY_CHARACTER = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_key(tag: str) -> str:
    """``tag`` as a valid MLflow metric key.

    MLflow takes letters, digits, ``_ - . /``, spaces and (except on Windows) ``:``, up to
    250 characters, and no path that normalises to another (``a//b``, ``./a``, ``a/..``,
    a leading ``/``). Every other character (non-ASCII letters and ``:`` too, so that a key
    is valid on every platform and store) becomes ``_``, an empty, ``.`` or ``..`` segment
    between slashes becomes ``_``, and a longer key is cut at 250 characters (dropping a
    segment the cut leaves invalid). Two tags that differ only in replaced characters share
    a key.

    Args:
        tag: A tag of :func:`attnas.tracking.event_mirrors.scalars` (``<phase>/<key>[/<name>]``).
    """
    key = "/".join(_key_segment(s) for s in tag.split("/"))
    if len(key) > MAX_KEY_LENGTH:
        key = key[:MAX_KEY_LENGTH]
        head, _, last = key.rpartition("/")
        if _key_segment(last) != last:
            key = head
    return key


def _key_segment(segment: str) -> str:
    segment = _BAD_KEY_CHARACTER.sub("_", segment)
    return "_" if segment in ("", ".", "..") else segment


def require_mlflow() -> None:
    """Raise a one-line :class:`ConfigError` when MLflow's client cannot be imported."""
    try:
        importlib.import_module("mlflow.tracking")
        importlib.import_module("mlflow.entities")
    except ImportError as exc:
        raise ConfigError(f"--mlflow needs the mlflow-skinny package ({exc}); "
                          f"pip install \"attnas[mlflow]\"") from None


class _Close:
    """The last item of the queue: end the MLflow runs with ``status``."""

    def __init__(self, status: str):
        self.status = status


class MlflowMirror:
    """The listener that sends each run's events to MLflow (see the module docstring).

    Args:
        tracking_uri: MLflow's tracking URI.
        experiment: Name of the experiment the runs go to (made when missing).
        flush_seconds: How long :meth:`close` waits for the metrics still queued.

    Raises:
        ConfigError: When MLflow cannot use ``tracking_uri`` or ``experiment`` is empty.
    """

    def __init__(self, tracking_uri: str, experiment: str = "attnas", flush_seconds: float = FLUSH_SECONDS):
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        if not experiment.strip():
            raise ConfigError("--mlflow-experiment: the experiment needs a name")
        try:
            self.client = MlflowClient(tracking_uri=tracking_uri)
        except MlflowException as exc:
            raise ConfigError(f"--mlflow {tracking_uri}: {str(exc).strip().splitlines()[0]}") from None
        self.experiment = experiment
        self.flush_seconds = flush_seconds
        self._steps = StepCounter()
        self._queue: queue.Queue = queue.Queue()
        self._run_ids: dict[Path, str] = {}  # used by the worker thread only
        self._experiment_id: str | None = None
        self._error: BaseException | None = None  # set by the worker thread
        self._warned = False
        self._thread = threading.Thread(target=self._work, name="attnas-mlflow-mirror", daemon=True)
        self._thread.start()

    def __call__(self, run_path: Path, event: dict) -> None:
        if self._error is not None:
            self._warn()
            return
        step, values = self._steps(run_path, event)
        if values:
            time_ms = int(round(float(event.get("time") or time.time()) * 1000))
            self._queue.put((Path(run_path), [(metric_key(tag), value, time_ms, step) for tag, value in values]))

    def close(self, error: BaseException | None = None) -> None:
        """Send what is queued (waiting up to ``flush_seconds``) and end the MLflow runs:
        ``FINISHED``, or ``KILLED`` after a :class:`KeyboardInterrupt`, ``FAILED`` after
        another ``error``."""
        status = "FINISHED" if error is None else "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED"
        self._queue.put(_Close(status))
        self._thread.join(self.flush_seconds)
        if self._thread.is_alive() and self._error is None:
            self._error = TimeoutError(f"MLflow did not take the last metrics within {self.flush_seconds:g} s")
        if self._error is not None:
            self._warn()

    def _warn(self) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(stop_message("--mlflow", self._error), stacklevel=3)

    def _work(self) -> None:
        """The worker thread: send the queued metrics, a batch per run, until :class:`_Close`."""
        while True:
            items = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while not isinstance(items[-1], _Close):
                    items.append(self._queue.get_nowait())
            close = items.pop() if isinstance(items[-1], _Close) else None
            if self._error is None:
                try:
                    self._send(items)
                    if close is not None:
                        for run_id in self._run_ids.values():
                            self.client.set_terminated(run_id, close.status)
                except Exception as exc:  # noqa: BLE001 - the live view must never stop the run
                    self._error = exc
            if close is not None:
                return

    def _send(self, items: list[tuple[Path, list[tuple[str, float, int, int]]]]) -> None:
        from mlflow.entities import Metric

        by_run: dict[Path, list[Any]] = {}
        for run_path, metrics in items:
            by_run.setdefault(run_path, []).extend(Metric(*m) for m in metrics)
        for run_path, metrics in by_run.items():
            run_id = self._run_id(run_path)
            for start in range(0, len(metrics), MAX_BATCH):
                self.client.log_batch(run_id, metrics=metrics[start:start + MAX_BATCH])

    def _run_id(self, run_path: Path) -> str:
        """The MLflow run of ``run_path``: the one tagged with its path (a resumed run), else a new one."""
        run_id = self._run_ids.get(run_path)
        if run_id is not None:
            return run_id
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            self._experiment_id = found.experiment_id if found else self.client.create_experiment(self.experiment)
        run_dir = str(Path(run_path).resolve())
        quote = next((q for q in ("'", '"') if q not in run_dir), None)
        runs = [] if quote is None else self.client.search_runs(
            [self._experiment_id], filter_string=f"tags.`{RUN_DIR_TAG}` = {quote}{run_dir}{quote}", max_results=1)
        if runs:
            run_id = runs[0].info.run_id
            self.client.update_run(run_id, status="RUNNING")
        else:
            run_id = self.client.create_run(self._experiment_id, run_name=Path(run_path).name,
                                            tags={RUN_DIR_TAG: run_dir}).info.run_id
        self._run_ids[run_path] = run_id
        return run_id


@contextlib.contextmanager
def mirroring(tracking_uri: str | None, experiment: str = "attnas") -> Iterator[MlflowMirror | None]:
    """Mirror the events of the runs of this process to MLflow inside the block
    (``tracking_uri`` ``None``: do nothing).

    Args:
        tracking_uri: MLflow's tracking URI, or ``None``.
        experiment: Name of the MLflow experiment.

    Raises:
        ConfigError: When the mlflow-skinny package is missing, MLflow cannot use
            ``tracking_uri`` or ``experiment`` is empty (before anything runs).
    """
    if tracking_uri is None:
        yield None
        return
    require_mlflow()
    with listening(MlflowMirror(tracking_uri, experiment)) as mirror:
        yield mirror
