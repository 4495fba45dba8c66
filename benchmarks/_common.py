"""What more than one script of ``benchmarks/`` and ``docs/results/<page>/`` shares.

Every such script runs as a module from the repository root (``python -m
benchmarks.speed.bench_local_sa``, ``python -m docs.results.autoattend_graph.rerank_study``), so
it imports this module, and ``attnas``, by their package names, without touching ``sys.path``.

Two parts:

- **Timing** (the speed benchmarks of ``benchmarks/speed/``): the AutoLA training steps, built
  with the search's optimiser settings (Ma et al., 2020, AutoLA Sec. 4.2: SGD with momentum
  0.9 and weight decay 3e-4 for the weights, lr 0.025; Adam for alpha as DARTS does), and the
  interleaved timing that runs every variant once per round so that load hits all alike.
- **Finished searches** (the AutoAttend studies of ``docs/results/autoattend_graph/``): a
  finished one-shot search opened for a study, its task, strategy, supernet and population.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from attnas.runs.run_dir import RunDir, read_jsonl

Batch = tuple[torch.Tensor, torch.Tensor]
Loss = Callable[[torch.nn.Module, Batch], torch.Tensor]


def cross_entropy(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The classification loss of one batch (the default ``loss`` of the steps)."""
    return F.cross_entropy(model(batch[0]), batch[1])


def sgd(params: Iterable[torch.nn.Parameter], foreach: bool = True) -> torch.optim.Optimizer:
    """The weights' optimiser (SGD, lr 0.025, momentum 0.9, weight decay 3e-4)."""
    return torch.optim.SGD(params, lr=0.025, momentum=0.9, weight_decay=3e-4, foreach=foreach)


def training_step(model: torch.nn.Module, params: Iterable[torch.nn.Parameter], batch: Batch,
                  loss: Loss = cross_entropy, foreach: bool = True) -> Callable[[], None]:
    """One SGD step of ``model`` on ``batch`` (a plain or a retrained network)."""
    opt = sgd(params, foreach)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss(model, batch).backward()
        opt.step()
    return step


def darts_step(net: torch.nn.Module, weights: list, alpha: list, batch_a: Batch, batch_b: Batch,
               loss: Loss = cross_entropy, foreach: bool = True) -> Callable[[], None]:
    """One first-order DARTS step: an SGD step of the weights on ``batch_a`` (train_A), then an
    Adam step of alpha on ``batch_b`` (train_B), only d loss / d alpha computed for the latter."""
    w_opt = sgd(weights, foreach)
    a_opt = torch.optim.Adam(alpha, lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3, foreach=foreach)

    def step() -> None:
        w_opt.zero_grad(set_to_none=True)
        loss(net, batch_a).backward(inputs=weights)
        w_opt.step()
        a_opt.zero_grad(set_to_none=True)
        loss(net, batch_b).backward(inputs=alpha)
        a_opt.step()
    return step


def time_interleaved(fns: dict[str, Callable[[], None]], repeats: int,
                     sync: Callable[[], None] = lambda: None, shuffle: bool = False) -> tuple[dict, dict, dict]:
    """Run every function once per round, ``repeats`` rounds, so that load hits all alike.

    ``shuffle``: a new order every round (fixed seed), so that no function always runs just
    after the same one (e.g. right after a large one that left the caches cold).

    Returns:
        Per name: the wall times, the process CPU times and the 1-minute load averages,
        one per round (lists; take their medians).
    """
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    loads: dict[str, list[float]] = {k: [] for k in fns}
    order, rng = list(fns), random.Random(0)
    for _ in range(repeats):
        if shuffle:
            rng.shuffle(order)
        for name in order:
            f = fns[name]
            sync()
            t, c = time.perf_counter(), time.process_time()
            f()
            sync()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            loads[name].append(os.getloadavg()[0])
    return wall, cpu, loads


def kernels_off(fn: Callable[[], object], *names: str) -> Callable[[], object]:
    """``fn`` run with the kernels ``names`` of :mod:`attnas.kernels` off (all of them when none
    is named): their eager PyTorch operations run; the kernels' previous state is restored after."""
    import attnas.kernels as kernels

    def run() -> object:
        before = set(kernels._disabled)
        kernels.disable(*names)
        try:
            return fn()
        finally:
            kernels.enable()
            if before:
                kernels.disable(*before)
    return run


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    """The median of each list."""
    return {k: statistics.median(v) for k, v in times.items()}


def kernel_bench_args(doc: str, repeats: int = 21) -> argparse.Namespace:
    """The options of the kernel benchmarks (``--threads``, ``--repeats``, ``--batch``), parsed
    (``doc``: the benchmark's docstring, shown by ``--help``); sets torch's thread count and
    prints the settings and the load average."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={torch.get_num_threads()} batch={args.batch} repeats={args.repeats} "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} torch={torch.__version__} "
          f"load {os.getloadavg()[0]:.2f}")
    return args


@dataclass
class FinishedSearch:
    """What a study needs of a finished one-shot run, with one torch thread.

    Attributes:
        run: The run directory.
        config: Its configuration.
        chosen: The architecture the search chose (``arch.json``).
        space: Its space.
        task: Its task, on the data root the run was created with.
        strategy: Its strategy, built on the run (nothing is trained by building it).
    """

    run: Any
    config: Any
    chosen: Any
    space: Any
    task: Any
    strategy: Any

    @cached_property
    def supernet(self):
        """The trained supernet, in evaluation mode."""
        supernet = self.strategy.load_supernet()
        supernet.eval()
        return supernet

    @cached_property
    def population(self) -> list[dict]:
        """Every scored candidate (``arch``, ``score``), from the search's last checkpoint."""
        return self.run.load_checkpoint("evolution")["state"]["population"]


def one_forward_per_batch(supernet, arch):
    """``supernet``'s forward along ``arch`` that computes each batch once (by ``batch.key``):
    the splits of a transductive graph are one batch, so scoring validation and test (and
    the validation loss) costs one forward."""
    outputs = {}

    def forward(batch):
        if batch.key not in outputs:
            outputs[batch.key] = supernet(batch, arch)
        return outputs[batch.key]

    return forward


def prior_samples(space, samples: int, sample_seed: int) -> list:
    """The first ``samples`` draws from ``space``'s prior with ``random.Random(sample_seed)``:
    the same architectures, in the same order, for every study that names the same seed (the
    score lists of their JSON lines follow this order)."""
    rng = random.Random(sample_seed)
    return [space.sample(rng) for _ in range(samples)]


def best_by_validation(val: list[float]) -> int:
    """The index of the highest validation score (ties: the earlier sample, as a search takes them)."""
    return max(range(len(val)), key=lambda k: (val[k], -k))


#: Keys of a one-shot search's scoring event that are not its score.
_EVENT_KEYS = frozenset({"time", "phase", "stage", "index", "arch"})


def supernet_scored(run_dir: str | os.PathLike, phases: tuple[str, ...] = ("evolution",)) -> list[dict]:
    """Every architecture a one-shot search scored on its supernet, first score of each, in event order.

    Reads ``events.jsonl`` (:func:`~attnas.runs.run_dir.read_jsonl`: a torn last line skipped): the events of ``phases`` that carry an ``arch`` (``evolution``: the
    evolutionary search's, with the evolution ``stage``; ``random``: random search's).

    Returns:
        ``{"key": canonical JSON of the arch, "arch", "stage" (None where not logged), "score"}`` per
        architecture.
    """
    seen, out = set(), []
    for event in read_jsonl(Path(run_dir) / RunDir.EVENTS):
        if event.get("phase") not in phases or "arch" not in event:
            continue
        key = json.dumps(event["arch"], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        score = next(v for k, v in event.items() if k not in _EVENT_KEYS and isinstance(v, (int, float))
                     and not isinstance(v, bool))
        out.append({"key": key, "arch": event["arch"], "stage": event.get("stage"), "score": float(score)})
    return out


def open_search(run_dir: str) -> FinishedSearch:
    """Open the finished one-shot run ``run_dir`` (one torch thread; on the CPU, or on the device
    that ``$ATTNAS_STUDY_DEVICE`` names, such as ``cuda``)."""
    from attnas.runs.build import build_strategy
    from attnas.pipeline import open_finished, run_task

    torch.set_num_threads(1)
    run, config, chosen, space = open_finished(run_dir)
    task = run_task(run, config, device=os.environ.get("ATTNAS_STUDY_DEVICE", "cpu"))
    return FinishedSearch(run, config, chosen, space, task, build_strategy(config, space, task, run))
