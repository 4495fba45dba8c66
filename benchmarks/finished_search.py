"""A finished one-shot search opened for a study: its task, strategy, supernet and population.

Shared by the study scripts of this folder (``rerank_study.py``, ``tie_break_study.py``,
``supernet_top_candidates.py``, ``attention_collapse_probe.py``, ``supernet_selection_noise.py``,
``cem_vs_random.py``, ``supernet_score_stability.py``, ``random_pick_run.py``), which run as
``python benchmarks/<script>.py`` and so import it by its module name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any


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
    import random

    rng = random.Random(sample_seed)
    return [space.sample(rng) for _ in range(samples)]


def best_by_validation(val: list[float]) -> int:
    """The index of the highest validation score (ties: the earlier sample, as a search takes them)."""
    return max(range(len(val)), key=lambda k: (val[k], -k))


def open_search(run_dir: str) -> FinishedSearch:
    """Open the finished one-shot run ``run_dir`` (one torch thread; on the CPU, or on the device
    that ``$ATTNAS_STUDY_DEVICE`` names, such as ``cuda``)."""
    import os

    import torch

    from attnas.build import build_strategy
    from attnas.pipeline import open_finished, run_task

    torch.set_num_threads(1)
    run, config, chosen, space = open_finished(run_dir)
    task = run_task(run, config, device=os.environ.get("ATTNAS_STUDY_DEVICE", "cpu"))
    return FinishedSearch(run, config, chosen, space, task, build_strategy(config, space, task, run))
