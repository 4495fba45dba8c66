"""Peak memory of one training step against the number of edges (the cost target "memory linear
in edges"): a model of the ``autoattend-hetero-deep`` space on tolokers (11,758 nodes, 1,038,000
directed edges) with a random share of its edges, measured by :func:`attnas.costs.measure.measure`
(``peak_memory_mb``: PyTorch's own tensor tracker during forward, loss and backward).

    ATTNAS_DATA=../shared/data python -m docs.results.heterophilous.memory_edges 'res:gat_sep_8' 0.25 0.5 1
"""

from __future__ import annotations

import sys

import torch

from attnas.config import load_config
from attnas.costs.measure import measure
from attnas.data.root import resolve_data_root
from attnas.runs.build import build_space, build_task
from attnas.tasks.node_classification import NodeBatch


def chain(op: str, layers: int) -> dict:
    """Every layer ``add(t-1:<op>, 0:zero)``."""
    return {"layers": [{"type": "add", "inputs": [{"source": t - 1, "op": op}, {"source": 0, "op": "zero"}]}
                       for t in range(1, layers + 1)]}


def main(arch: str, shares: list[float], recipe: str = "autoattend-hetero-deep") -> None:
    torch.set_num_threads(1)
    config = load_config(recipe, ["task.dataset=tolokers", "task.split=0"])
    task, space = build_task(config, resolve_data_root(), torch.device("cpu")), build_space(config)
    full = next(iter(task.batches("train")))
    choices = chain(arch.split(":", 1)[1], config.space.options.layers) if arch.startswith("res:") else None
    model = space.build(space.arch(choices), task)
    gen = torch.Generator().manual_seed(0)
    edges = full.edge_index.size(1)
    print(f"{arch}: {config.space.options.layers} layers, hidden {config.space.options.hidden}, "
          f"{full.num_nodes} nodes", flush=True)
    for share in shares:
        keep = torch.randperm(edges, generator=gen)[: int(share * edges)]
        batch = NodeBatch(full.x, full.edge_index[:, keep], full.y, full.mask, key=f"share{share}")
        mb = measure(model, task, batch, ["peak_memory_mb"])["peak_memory_mb"]
        print(f"edges {keep.numel():9d}  peak {mb:8.1f} MiB  ({1024 * mb / keep.numel():.2f} KiB per edge)",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [float(s) for s in sys.argv[2:]])
