"""Scoring architectures with a supernet's weights (the inner evaluation of Eq. 5).

:func:`supernet_score` scores one architecture in this process; :func:`score_candidates`
is the worker side of :meth:`~attnas.strategies.one_shot_base._OneShot.score_many`: a
module-level function that a parallel executor ships to its workers by reference, which
rebuild the space, task and supernet once per process and score a chunk of candidates
exactly as the main process would.
"""

from __future__ import annotations

import torch
from torch import nn

from attnas.core.arch import Arch
from attnas.runs.rng import seed_everything
from attnas.scale.parallel import RunSpec, map_in_threads, worker_cached


def supernet_score(supernet: nn.Module, task, arch: Arch, batch_size: int) -> float:
    """Validation score of ``arch`` with the supernet's weights (Eq. 5's inner evaluation)."""
    supernet.eval()
    return task.evaluate(lambda batch: supernet(batch, arch), "val", batch_size=batch_size)


def score_candidates(candidates: list[dict], spec: RunSpec, weights: dict, token: str, batch_size: int,
                     score_threads: int = 1) -> list[float]:
    """Worker side of :meth:`_OneShot.score_many`: rebuild (once per process) and score.

    Args:
        candidates: ``Arch.choices`` of the candidates.
        spec: How to rebuild the space and the task.
        weights: The supernet's ``state_dict``.
        token: Identifies ``weights`` (the worker keeps one supernet per token).
        batch_size: Evaluation batch size.
        score_threads: Candidates scored side by side in the worker, one torch thread
            each (as the main process would score them, so the scores do not depend on
            the executor).
    """

    def build():
        _, space, task = spec.build()
        seed_everything(0)
        supernet = space.supernet(task).to(task.device)
        supernet.load_state_dict(weights)
        return space, task, supernet

    space, task, supernet = worker_cached(("supernet", spec.key(), token), build)
    supernet.eval()  # once, before threads share the module
    on_cpu = getattr(task, "device", torch.device("cpu")).type == "cpu"
    return list(map_in_threads(lambda c: supernet_score(supernet, task, Arch(space.name, c), batch_size), candidates,
                               score_threads if on_cpu else 1))
