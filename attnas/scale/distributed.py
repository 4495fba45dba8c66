"""Data-parallel training over several processes (GPUs) with ``torch.distributed``.

Launch any search with ``torchrun``; the pipeline reads the usual environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)::

    torchrun --nproc-per-node 4 -m attnas search autoattend-ppi --out runs/ppi

Every process builds the same space, task and model from the same seed; then, per
training step:

- **the same architecture on every rank**: the one-shot sampler is a ``random.Random``
  seeded identically on every rank and consumed identically, so every rank draws the
  same architecture (checked at every checkpoint with :meth:`DistContext.assert_same`);
- **rank-aware data**: :meth:`DistContext.shard` gives rank ``r`` the ``r``-th of each
  group of ``world_size`` consecutive batches of the (identically shuffled) training
  stream; a task whose training split is one full batch (transductive graphs) is split
  by :meth:`NodeBatch.shard`-style ``batch.shard(rank, world)`` into disjoint parts of
  its loss terms instead;
- **gradient averaging**: :meth:`DistContext.average_gradients` all-reduces the
  gradients of the parameters the step used (all ranks used the same ones) in one
  flat bucket. Parameters the sampled architecture did not use keep ``grad=None`` on
  every rank, so Adam leaves them alone exactly as in a single process. (PyTorch's
  ``DistributedDataParallel`` would need ``find_unused_parameters=True`` for a
  supernet; :func:`wrap_ddp` is there for models that use all their parameters every
  step, e.g. a DARTS relaxation.)
- **rank-0-only writes**: ranks other than 0 get a :class:`FollowerRun`, a read-only
  view of the run directory (they read checkpoints to resume; logging and saving are
  no-ops), so events, checkpoints and ``arch.json`` are written once.

Equivalence (tested in ``tests/scale/test_distributed.py``): with equal-sized parts, one
step on ``W`` ranks equals one step of a single process on the union of the ``W``
batches (the mean loss over the union), up to floating-point summation order. With
dropout, the full-batch case stays exact (every rank draws the same dropout mask from
the same generator); for mini-batch tasks the masks differ from a single process's.
The single-process loss is a mean of means, so unequal parts (the last, smaller
batch) are weighted by their share of the loss terms where the task says it
(``batch.shard``); a final group of fewer than ``W`` batches is dropped.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import pickle
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as tdist
from torch import nn

from attnas.core.errors import DIVERGED_HINT, AttnasError, ConfigError, WorkerError, check_finite_loss
from attnas.runs.run_dir import RunDir, maybe_inject_fault


def _collective(call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, a ``torch.distributed`` collective; a peer that is gone is a
    :class:`~attnas.core.errors.WorkerError` that says so (gloo's own words follow it).

    A rank that stops (its own error line, or a kill) closes its connections, and the
    ranks waiting for it in a collective would otherwise report only the transport's error.
    """
    try:
        return call(*args, **kwargs)
    except RuntimeError as exc:  # DistBackendError and gloo's transport errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WorkerError(f"another rank of the distributed run stopped (its own output says why); this rank "
                          f"lost it in {call.__name__}: {first}") from None


@dataclass
class DistContext:
    """This process's place in a distributed run.

    Attributes:
        rank: Global rank (0 writes the run directory).
        world_size: Number of processes.
        local_rank: Rank on this machine (selects the GPU).
        backend: ``gloo`` (CPU) or ``nccl`` (GPU).
        owns_group: Whether :func:`setup` created the process group (and :func:`teardown` ends it).
    """

    rank: int
    world_size: int
    local_rank: int = 0
    backend: str = "gloo"
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0."""
        return self.rank == 0

    def _device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else torch.device("cpu")

    def barrier(self) -> None:
        """Wait for every rank."""
        _collective(tdist.barrier)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """``obj`` of rank ``src`` on every rank (picklable data)."""
        box = [obj]
        _collective(tdist.broadcast_object_list, box, src=src)
        return box[0]

    @torch.no_grad()
    def broadcast_module(self, module: nn.Module, src: int = 0) -> None:
        """Copy rank ``src``'s parameters and buffers to every rank (as DDP does at start)."""
        for t in itertools.chain(module.parameters(), module.buffers()):
            _collective(tdist.broadcast, t.data, src=src)

    def assert_same(self, value: Any, what: str) -> None:
        """Raise on every rank unless ``value`` (picklable) is equal on all ranks."""
        digest = hashlib.sha256(pickle.dumps(value)).hexdigest()
        seen = [None] * self.world_size
        _collective(tdist.all_gather_object, seen, digest)
        if len(set(seen)) != 1:
            raise RuntimeError(f"distributed ranks disagree on the {what}: per-rank digests {seen}")

    def shard(self, batches: Iterable) -> Iterator[tuple[Any, float]]:
        """This rank's share of a training stream, as ``(batch, share of the union's loss terms)``.

        A stream of several batches is taken in groups of ``world_size``: rank ``r`` gets
        the ``r``-th of each group (share ``1/world_size``); a final incomplete group is
        dropped, so every rank takes the same number of steps. A stream of one batch is
        split with ``batch.shard(rank, world_size) -> (part, share)``.

        Raises:
            ConfigError: If the stream has fewer batches than ranks (or one batch that
                cannot be split).
        """
        it = iter(batches)
        group = list(itertools.islice(it, self.world_size))
        if len(group) == 1:
            if not hasattr(group[0], "shard"):
                raise ConfigError(f"the training split is one batch of type {type(group[0]).__name__}, which "
                                  f"cannot be split across {self.world_size} processes (it has no shard method)")
            yield group[0].shard(self.rank, self.world_size)
            return
        if len(group) < self.world_size:
            raise ConfigError(f"the training split has {len(group)} batches, fewer than the {self.world_size} "
                              f"processes; lower the batch size")
        while len(group) == self.world_size:
            yield group[self.rank], 1.0 / self.world_size
            group = list(itertools.islice(it, self.world_size))

    def step_loss(self, loss: torch.Tensor, share: float, phase: str = "training", step: str | int = "a step",
                  hint: str = DIVERGED_HINT) -> tuple[torch.Tensor, float]:
        """``(loss to back-propagate, the union's mean loss)`` for this rank's part.

        The part's mean loss is scaled by ``share * world_size``, so that averaging the
        gradients over ranks gives the gradient of the union's mean loss. The union's loss
        is all-reduced (so every rank sees the same value and raises together when it is
        not finite, with :func:`~attnas.core.errors.check_finite_loss`'s message).

        Args:
            loss: This rank's mean loss of its part.
            share: Its part's share of the union's loss terms.
            phase: The phase, named with ``step`` when the loss is NaN or infinite.
            step: Where in the phase (e.g. ``"epoch 3, step 7"``; an integer is a step number).
            hint: What to try instead.

        Raises:
            TrainingError: When the union's loss is NaN or infinite (on every rank).
        """
        scale = share * self.world_size
        scaled = loss if scale == 1.0 else loss * scale
        total = scaled.detach().reshape(1).to(torch.float64)
        _collective(tdist.all_reduce, total)
        value = check_finite_loss(total.item() / self.world_size, phase, step, hint)
        return scaled, value

    @torch.no_grad()
    def average_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Average the gradients of ``params`` over ranks (one all-reduce of a flat bucket).

        Parameters without a gradient (unused by this step's architecture) are skipped;
        all ranks must have used the same parameters, which is checked.
        """
        grads = [p.grad for p in params if p.grad is not None]
        count = torch.tensor([len(grads), -len(grads)], dtype=torch.float64, device=self._device())
        _collective(tdist.all_reduce, count, op=tdist.ReduceOp.MAX)
        if count[0].item() != len(grads) or -count[1].item() != len(grads):
            raise RuntimeError("distributed ranks used different parameters in one step "
                               "(they sampled different architectures)")
        if not grads:
            return
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        flat = _flatten_dense_tensors(grads)
        _collective(tdist.all_reduce, flat)
        flat /= self.world_size
        for g, avg in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(avg)


_CURRENT: DistContext | None = None


def current() -> DistContext | None:
    """The distributed context of this process (``None`` in a single-process run)."""
    return _CURRENT


def env_world_size() -> int:
    """``WORLD_SIZE`` from the environment (1 when unset)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ConfigError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not an integer") from None


def setup(device: torch.device) -> tuple[DistContext | None, torch.device]:
    """Join the process group described by the environment, if there is one.

    Uses ``nccl`` when ``device`` is CUDA (each rank on ``cuda:LOCAL_RANK``) and ``gloo``
    on CPU. A process group created before (e.g. by the caller) is reused.

    Returns:
        ``(context, device for this rank)``; ``(None, device)`` outside a distributed run.
    """
    global _CURRENT
    if _CURRENT is not None:
        return _CURRENT, _rank_device(_CURRENT, device)
    if env_world_size() <= 1 and not tdist.is_initialized():
        return None, device
    owns = False
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not tdist.is_initialized():
        for key in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
            if key not in os.environ:
                raise ConfigError(f"WORLD_SIZE is set but {key} is not; launch distributed runs with torchrun")
        tdist.init_process_group(backend=backend)
        owns = True
    else:
        backend = tdist.get_backend()
    ctx = DistContext(rank=tdist.get_rank(), world_size=tdist.get_world_size(),
                      local_rank=int(os.environ.get("LOCAL_RANK", "0")), backend=backend, owns_group=owns)
    _CURRENT = ctx
    if not ctx.is_main:
        os.environ["ATTNAS_PROGRESS"] = "0"  # one progress bar (rank 0's)
    return ctx, _rank_device(ctx, device)


def on_main(ctx: DistContext | None, check: Callable[..., Any], *args: Any) -> None:
    """Run ``check(*args)`` on rank 0 alone (in this process outside a distributed run).

    Every rank raises the :class:`~attnas.core.errors.AttnasError` that rank 0's check raised,
    so a check only rank 0 can make (the run directory: new, writable, not locked) stops
    every rank at once with the same one line, instead of leaving the others at a barrier
    that then breaks with a connection error.
    """
    if ctx is None:
        check(*args)
        return
    error = None
    if ctx.is_main:
        try:
            check(*args)
        except AttnasError as exc:
            error = exc
    error = ctx.broadcast_object(error)
    if error is not None:
        raise error


def _rank_device(ctx: DistContext, device: torch.device) -> torch.device:
    if device.type != "cuda":
        return device
    torch.cuda.set_device(ctx.local_rank)
    return torch.device("cuda", ctx.local_rank)


def teardown() -> None:
    """Leave the process group (destroying it if :func:`setup` created it)."""
    global _CURRENT
    ctx, _CURRENT = _CURRENT, None
    if ctx is not None and ctx.owns_group and tdist.is_initialized():
        tdist.destroy_process_group()


def wrap_ddp(module: nn.Module, ctx: DistContext | None = None) -> nn.Module:
    """``module`` wrapped in ``DistributedDataParallel`` (unchanged outside a distributed run).

    For models that use every parameter in every step (a DARTS relaxation); a one-shot
    supernet uses :meth:`DistContext.average_gradients` instead.
    """
    ctx = ctx or current()
    if ctx is None:
        return module
    device_ids = [ctx.local_rank] if ctx.backend == "nccl" else None
    return nn.parallel.DistributedDataParallel(module, device_ids=device_ids)


class FollowerRun(RunDir):
    """A read-only view of a run directory for ranks other than 0.

    Checkpoints and files are read as usual (to resume); logging, checkpointing and
    writing are no-ops, so rank 0 alone writes the run.
    """

    def lock(self) -> None:  # noqa: D102 - no-op on followers
        pass

    def log(self, event: dict) -> None:  # noqa: D102 - nothing written (a test's ATTNAS_FAULT may still kill)
        maybe_inject_fault(event)

    def save_checkpoint(self, tag: str, step: int, state: dict):  # noqa: D102
        return self.checkpoint_dir / f"{tag}-{step:08d}.ckpt"

    def write_json(self, name: str, obj: Any) -> None:  # noqa: D102
        pass

    def write_text(self, name: str, text: str) -> None:  # noqa: D102
        pass

    def update_run_info(self, **fields: Any) -> None:  # noqa: D102
        pass

    def truncate_events(self, offset: int) -> None:  # noqa: D102
        pass

    def rewind_events(self) -> None:  # noqa: D102
        pass

    def clear_checkpoints(self, tag: str) -> None:  # noqa: D102
        pass


def free_port() -> int:
    """A free TCP port on this machine (for ``MASTER_PORT``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank: int, fn: Callable, world_size: int, port: int, threads: int, args: tuple) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world_size))
    torch.set_num_threads(threads)
    fn(*args)


def spawn(fn: Callable, world_size: int, *args: Any, threads: int = 1) -> None:
    """Run ``fn(*args)`` in ``world_size`` new processes set up as one distributed run.

    The single-machine alternative to ``torchrun`` (tests use it with the gloo backend).
    ``fn`` must be importable (a module-level function); it finds its rank in the
    environment, as under ``torchrun``.
    """
    import torch.multiprocessing as mp

    mp.spawn(_spawned, args=(fn, world_size, free_port(), threads, args), nprocs=world_size, join=True)
