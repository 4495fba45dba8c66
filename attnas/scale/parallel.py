"""Running independent pieces of a search in parallel: in-process, on a local Ray, or on a Ray cluster.

Three parts of a run are independent and can run side by side: the scoring of a stage's
candidates with supernet weights, the seeds of a multi-seed retraining, and the searches
of a sweep. Each goes through an :class:`Executor`::

    with make_executor(workers=2) as ex:          # local Ray with 2 worker processes
        ref = ex.put(big_state_dict)               # into the object store once
        for result in ex.imap(fn, items, ref):     # fn(item, state_dict), results in order
            ...

``workers`` of ``None``/``1`` (and no address) gives the :class:`SequentialExecutor`,
which runs everything in this process; otherwise a :class:`RayExecutor` is used (the
optional extra: ``pip install "attnas[ray]"``). Results always come back in the order
of ``items``, so the caller logs and checkpoints them exactly as a sequential run would;
with the same seed the result of a run does not depend on the executor. (Workers use
as many torch threads as this process, since CPU kernels are bit-reproducible only for
the same thread count; with many workers, lower ``attnas --threads``.)

Worker functions rebuild what they need (space, task, supernet) from a :class:`RunSpec`
(the resolved config as plain data, the data root and the device) and keep it in a small
per-process cache (:func:`worker_cached`), so each worker process builds it once.

Faults: a Ray worker that dies (killed, out of memory) is replaced and its task re-run
(``retries`` times); a task that dies every time, or a cluster whose head stops answering
(checked every :attr:`RayExecutor.poll_seconds` while a result is awaited), is a
:class:`~attnas.core.errors.WorkerError`. For tests, ``ATTNAS_WORKER_FAULT=<n>[:<marker
file>]`` makes the worker that runs the n-th task submitted by an executor SIGKILL itself
the first time it runs it (it creates the marker file first; the re-run finds it and goes
through).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnas.core.errors import AttnasError, ConfigError, UnsupportedError, WorkerError

RAY_HINT = 'parallel workers need Ray, an optional extra: pip install "attnas[ray]"'


@dataclass(frozen=True)
class RunSpec:
    """What a worker process needs to rebuild a run's space and task.

    Attributes:
        config: The resolved run config as plain data (``RunConfig.to_dict()``).
        data_root: The data root (must exist at the same path on every worker machine).
        device: Where workers compute (``cpu``).
    """

    config: dict
    data_root: str
    device: str = "cpu"

    def key(self) -> str:
        """A short hash identifying the spec (for worker caches)."""
        text = json.dumps([self.config, self.data_root, self.device], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run_config(self) -> Any:
        """The validated :class:`~attnas.config.RunConfig`."""
        from attnas.config import config_from_dict

        return config_from_dict(self.config)

    def build(self) -> tuple[Any, Any, Any]:
        """``(config, space, task)`` rebuilt from the spec."""
        import torch

        from attnas.runs.build import build_space, build_task

        config = self.run_config()
        space = build_space(config)
        task = build_task(config, Path(self.data_root), torch.device(self.device))
        return config, space, task


_CACHE: OrderedDict[Any, Any] = OrderedDict()
_CACHE_SIZE = 2


def worker_cached(key: Any, build: Callable[[], Any]) -> Any:
    """``build()``'s result, built once per process per ``key`` (the last two keys are kept)."""
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = build()
    _CACHE[key] = value
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


class Executor:
    """Runs ``fn(item, *shared)`` for each item, in this process (the base is sequential).

    Attributes:
        workers: How many items run at once.
        parallel: Whether items run in other processes.
    """

    workers: int = 1
    parallel: bool = False

    def put(self, obj: Any) -> Any:
        """A handle to ``obj`` that can be passed to :meth:`imap` as a shared argument."""
        return obj

    def imap(self, fn: Callable, items: Iterable, *shared: Any) -> Iterator:
        """Yield ``fn(item, *shared)`` for each item, in the order of ``items``."""
        for item in items:
            yield fn(item, *shared)

    def imap_outcomes(self, fn: Callable, items: Iterable, *shared: Any) -> Iterator[tuple[Any, Exception | None]]:
        """Yield ``(fn(item, *shared), None)``, or ``(None, error)`` where it raised, in the order of ``items``.

        For callers that keep every finished result when one item fails (a retrain's
        seeds). Here the items run one after the other, so nothing follows the first
        error; :class:`RayExecutor` has run the other items anyway and yields them all.
        """
        for item in items:
            try:
                result = fn(item, *shared)
            except Exception as exc:  # noqa: BLE001 - handed to the caller
                yield None, exc
                return
            yield result, None

    def map(self, fn: Callable, items: Iterable, *shared: Any) -> list:
        """``list(imap(...))``."""
        return list(self.imap(fn, items, *shared))

    def describe(self) -> dict:
        """What to record in run.json."""
        return {"workers": self.workers, "ray_address": None}

    def close(self) -> None:
        """Release the workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SequentialExecutor(Executor):
    """Everything in this process, one item after the other."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UnsupportedError(RAY_HINT) from None
    return ray


def _run_task(fn: Callable, threads: int, fault_marker: str | None, item: Any, *shared: Any) -> Any:
    """Body of every Ray task: pin threads, silence progress bars, maybe inject a fault, run."""
    import torch

    os.environ["ATTNAS_PROGRESS"] = "0"
    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    if fault_marker is not None and not os.path.exists(fault_marker):
        Path(fault_marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return fn(item, *shared)


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address (``None`` for ``auto``); a malformed one is a ConfigError."""
    if address == "auto":
        return None
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r}: expected host:port or ray://host:port")
    return host, int(port)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast (Ray itself retries for minutes) when ``host:port`` does not answer."""
    hp = _host_port(address)
    if hp is None:
        return
    host, port = hp
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise AttnasError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def _poll_seconds(default: float) -> float:
    """``ATTNAS_RAY_POLL_SECONDS`` (a number > 0) when it is set, else ``default``."""
    text = os.environ.get("ATTNAS_RAY_POLL_SECONDS", "")
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"ATTNAS_RAY_POLL_SECONDS={text!r}: expected a number of seconds > 0")
    return seconds


def _worker_fault_spec() -> tuple[int, str | None, str | None]:
    """``ATTNAS_WORKER_FAULT=<n>[:<marker file>]`` as ``(n, marker, temporary folder to remove)``.

    The worker running the n-th task creates the marker and SIGKILLs itself; a marker
    that exists already means the fault has happened (so the re-run goes through).
    """
    spec = os.environ.get("ATTNAS_WORKER_FAULT", "")
    if not spec:
        return 0, None, None
    n, _, marker = spec.partition(":")
    try:
        at = int(n)
    except ValueError:
        raise ConfigError(f"ATTNAS_WORKER_FAULT={spec!r}: expected <task number>[:<marker file>]") from None
    if marker:
        return at, marker, None
    folder = tempfile.mkdtemp(prefix="attnas-worker-fault-")
    return at, os.path.join(folder, "fault-happened"), folder


class RayExecutor(Executor):
    """Items as Ray tasks, on a local Ray started here or on a running cluster.

    Args:
        workers: Worker processes of a local Ray (``num_cpus``); with ``address``, the
            number of CPUs the cluster offers is used when ``None``.
        address: A Ray cluster address (``ray://host:10001`` or ``host:6379``); ``None``
            starts a local Ray (or uses one already started in this process).
        threads: torch threads per task (default: this process's ``torch.get_num_threads()``:
            CPU kernels give bit-identical results only for the same thread count, and a score
            that differs in its last bit can change a ranking).
        retries: How often a task whose worker died is re-run.
    """

    parallel = True
    #: Seconds between checks that the cluster's head still answers, while a result is awaited
    #: (``ATTNAS_RAY_POLL_SECONDS`` sets another for the executors made after it is set: tests
    #: that kill a head use a shorter one).
    poll_seconds = 2.0

    def __init__(self, workers: int | None = None, address: str | None = None, threads: int | None = None,
                 retries: int = 3):
        import torch

        ray = _import_ray()
        self._ray = ray
        self.address, self.retries = address, retries
        self.threads = threads or torch.get_num_threads()
        self.poll_seconds = _poll_seconds(type(self).poll_seconds)
        self._owns = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = dict(include_dashboard=False, configure_logging=False, log_to_driver=True)
            if address:
                _check_reachable(address)
            try:
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    # workers import this attnas even when it is not installed (a source checkout)
                    pkg_parent = str(Path(__file__).resolve().parents[2])  # the folder holding attnas/
                    path = os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH", "")) if p)
                    ray.init(num_cpus=workers, runtime_env={"env_vars": {"PYTHONPATH": path,
                                                                         "ATTNAS_PROGRESS": "0"}}, **kwargs)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray"
                raise AttnasError(f"could not start {where}: {str(exc).splitlines()[0]}") from None
            self._owns = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, workers or cpus)
        self._remote = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(_run_task)
        self._head = self._head_address()
        self._submitted = 0
        self._fault_at, self._fault_marker, self._fault_dir = _worker_fault_spec()

    def put(self, obj: Any) -> Any:
        self._check_head()
        return self._ray.put(obj)

    def _submit(self, fn: Callable, items: Iterable, shared: tuple) -> list:
        self._check_head()
        refs = []
        for item in items:
            self._submitted += 1
            marker = self._fault_marker if self._fault_at and self._submitted == self._fault_at else None
            refs.append(self._remote.remote(fn, self.threads, marker, item, *shared))
        return refs

    def imap(self, fn: Callable, items: Iterable, *shared: Any) -> Iterator:
        # (after an error the remaining tasks run to their end and are ignored: cancelling
        # tasks that are finishing crashed Ray 2.60's task manager)
        for ref in self._submit(fn, items, shared):
            yield self._get(ref)

    def imap_outcomes(self, fn: Callable, items: Iterable, *shared: Any) -> Iterator[tuple[Any, Exception | None]]:
        for ref in self._submit(fn, items, shared):
            try:
                yield self._get(ref), None
            except Exception as exc:  # noqa: BLE001 - handed to the caller
                yield None, exc

    def _head_address(self) -> tuple[str, int] | None:
        """Where the cluster's head answers: the Ray client server of a ``ray://`` address,
        else the GCS (``None`` when Ray does not say)."""
        if self.address and self.address.startswith("ray://"):
            return _host_port(self.address)
        try:
            host, _, port = self._ray.get_runtime_context().gcs_address.rpartition(":")
            return host, int(port)
        except Exception:  # noqa: BLE001 - an older or client-mode Ray: no check
            return None

    def _check_head(self) -> None:
        """Raise a :class:`WorkerError` when the cluster's head no longer answers.

        Ray itself waits for a lost head (a ``ray.get`` of a task that can no longer run
        never returns) and then ends this process with its own log line after a minute.
        """
        if self._head is None:
            return
        host, port = self._head
        try:
            socket.create_connection((host, port), timeout=self.poll_seconds).close()
        except OSError as exc:
            where = f"the Ray cluster at {self.address}" if self.address else "the local Ray"
            raise WorkerError(f"lost {where}: its head ({host}:{port}) does not answer "
                              f"({exc.strerror or exc}); what finished is kept, run the command again to "
                              "continue") from None

    def _get(self, ref: Any) -> Any:
        exc_mod = self._ray.exceptions
        while not self._ray.wait([ref], timeout=self.poll_seconds)[0]:
            self._check_head()
        try:
            return self._ray.get(ref)
        except exc_mod.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (exc_mod.WorkerCrashedError, exc_mod.NodeDiedError) as exc:
            tries = self.retries + 1
            raise WorkerError(f"a Ray worker died {tries} time{'s' if tries > 1 else ''} running one task "
                              f"({type(exc).__name__}); see the Ray logs") from None

    def describe(self) -> dict:
        return {"workers": self.workers, "ray_address": self.address}

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False
        if self._fault_dir:
            shutil.rmtree(self._fault_dir, ignore_errors=True)
            self._fault_dir = None


#: Most parallel workers one command starts (each is a Ray actor: a process).
MAX_WORKERS = 4096


def make_executor(workers: int | None = None, address: str | None = None, threads: int | None = None,
                  check_only: bool = False) -> Executor | None:
    """The executor for ``--workers`` / ``--ray-address``.

    Args:
        workers: Parallel workers (``None`` or 1 without an address: sequential).
        address: A Ray cluster address.
        threads: torch threads per Ray task (default: as many as this process uses).
        check_only: Only validate the arguments (and that Ray is installed when needed);
            start nothing and return ``None``.

    Raises:
        ConfigError: For ``workers < 1`` or more than :data:`MAX_WORKERS`.
        UnsupportedError: When parallel work is asked for and Ray is not installed.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"--workers must be an integer >= 1, got {workers!r}")
    if workers is not None and workers > MAX_WORKERS:
        raise ConfigError(f"--workers {workers}: at most {MAX_WORKERS:,} workers (each one a process)")
    if not address and (workers is None or workers == 1):
        return None if check_only else SequentialExecutor()
    if address:
        _host_port(address)
    if check_only:
        ray = _import_ray()
        if address and not ray.is_initialized():
            _check_reachable(address)
        return None
    return RayExecutor(workers, address, threads=threads)


def map_in_threads(fn: Callable[[Any], Any], items: Iterable, threads: int) -> Iterator:
    """``fn`` over ``items`` in ``threads`` Python threads of one torch thread each; results in order.

    For many independent inference passes on the CPU, such as scoring candidate
    architectures with supernet weights: their small matrix products (width 64, a batch
    of 128) gain little from splitting each product between intra-op threads, whereas
    independent passes in separate threads run side by side (torch releases the GIL in its
    kernels). Measured on two cores (AutoAttend, SST-5 dev set): 0.69 s per architecture
    in two threads against 1.10 s with two intra-op threads.

    With ``threads > 1`` every item, even a lone one, is computed in a worker thread that
    first sets ``torch.set_num_threads(1)`` for itself, so the results are exactly those of
    ``map(fn, items)`` with one torch thread, whatever the number of items. The caller's
    own thread count is untouched while it consumes the results, and torch's default for
    new threads is put back at the end. ``fn`` must not change shared state (a module in
    evaluation mode under ``torch.inference_mode`` is fine). With ``threads <= 1`` this is
    a plain sequential ``map`` with the current thread count.

    Args:
        fn: The function applied to each item.
        items: The items.
        threads: Python threads (each with one torch intra-op thread).

    Yields:
        ``fn(item)`` for each item, in the order of ``items``, as soon as it and every
        earlier one are done.
    """
    items = list(items)
    if threads <= 1:
        yield from map(fn, items)
        return
    if not items:
        return
    import torch
    from concurrent.futures import ThreadPoolExecutor

    previous = torch.get_num_threads()

    def one_torch_thread(item: Any) -> Any:
        torch.set_num_threads(1)  # this worker thread's own count (and torch's default for new threads)
        return fn(item)

    pool = ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="attnas-map")
    try:
        yield from pool.map(one_torch_thread, items)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # an abandoned generator waits only for running items
        torch.set_num_threads(previous)


def chunks(items: list, n: int) -> list[list]:
    """``items`` split into at most ``n`` contiguous, nearly equal, non-empty chunks."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]
