"""Digests of the default code path's numbers: one fixed-seed training step of every workload whose
operations moved between the readable equations and the optional kernels.

Each workload is built from seed 0, runs forward and backward once (kernels as a run has them:
``attnas.runs.build.use_kernels()``), and is reduced to one SHA-256 of its loss and of every
parameter gradient (by parameter name, raw float bytes). The same digest from two checkouts
means the step computes bit-identical numbers in both. Module paths are looked up under their
current names, then their earlier ones, so an older checkout can be checked with this file.

Workloads: the AutoAttend text supernet (SST-5; GRU, max pool 3), the AutoAttend graph
supernet (Cora; sparse propagation and projection), the paper's D-VAE ELBO (ENAS graphs; GRU
steps, per-step linear maps, edge logits), the relaxed full-attention network (local
self-attention) and the relaxed and discrete AutoLA networks (NCHW and channels-last input).

Usage (compare two checkouts; prints ``name digest`` lines, or JSON with ``--json``)::

    PYTHONPATH=. python -m benchmarks.checks.default_path_digests
    cd /tmp && PYTHONPATH=/path/to/other/checkout python /path/to/this/checkout/benchmarks/checks/default_path_digests.py

(The file imports nothing but ``attnas`` and ``torch``, so it runs against any checkout.)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import random
from collections.abc import Callable

import torch


def _module(*names: str):
    """The first of ``names`` that imports (current path first, then earlier ones)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(names[0])


def digest(loss: torch.Tensor, model: torch.nn.Module) -> str:
    """SHA-256 of the loss and every parameter gradient (by name), as raw bytes."""
    h = hashlib.sha256(loss.detach().double().numpy().tobytes())
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        if p.grad is not None:
            h.update(p.grad.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def autoattend_supernet(pool: str, batch_size: int, layers: int, hidden: int, heads: int):
    """``(space, task, supernet, batch)``: an AutoAttend supernet (seed 0, training mode) on real
    data and one training batch (seed 0). ``pool="text"``: SST-5 with ``layers``, ``hidden``,
    ``heads`` and batch ``batch_size``; ``"graph"``: the ``autoattend-cora`` recipe on Cora
    (the recipe's sizes; the other arguments are not used)."""
    from attnas.data.root import resolve_data_root

    root = resolve_data_root()
    if pool == "text":
        from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
        from attnas.tasks.text_classification import TextClassificationConfig, TextClassificationTask

        task = TextClassificationTask(TextClassificationConfig(dataset="sst5", batch_size=batch_size), root)
        space = AutoAttendSpace(AutoAttendConfig(layers=layers, hidden=hidden, pool="text", heads=heads,
                                                 context="fc", dropout=0.1, attn_dropout=0.1))
    else:
        from attnas.config import load_config

        build = _module("attnas.runs.build", "attnas.build")
        build_space, build_task = build.build_space, build.build_task

        cfg = load_config("autoattend-cora")
        space, task = build_space(cfg), build_task(cfg, root, torch.device("cpu"))
    torch.manual_seed(0)
    supernet = space.supernet(task).train()
    batch = next(iter(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(0))))
    return space, task, supernet, batch


def autoattend(pool: str) -> str:
    space, task, supernet, batch = autoattend_supernet(pool, 32, layers=4, hidden=32, heads=4)
    rng = random.Random(0)
    loss = sum(task.loss(supernet(batch, space.sample(rng)), batch) for _ in range(6))
    loss.backward()
    return digest(loss, supernet)


def dvae() -> str:
    from attnas.data.enas import load_enas6
    from attnas.graphvae.vae import GraphVAE, paper_model

    data = load_enas6().train
    torch.manual_seed(0)
    model = GraphVAE(paper_model("D-VAE", hidden=64), data.num_types, data.max_nodes).train()
    dags, _ = next(iter(data.batches(16, shuffle=True, generator=torch.Generator().manual_seed(0))))
    loss = model.loss(dags)["loss"]
    loss.backward()
    return digest(loss, model)


def fullattn() -> str:
    from attnas.models.stagewise_network import RelaxedStagewiseNetwork

    blocks = _module("attnas.ops.fullattn.self_attention_block", "attnas.ops.self_attention_block")
    # before space.impl was retired the space passed impl="fused" (its default) to the network
    options = {"impl": "fused"} if "impl" in inspect.signature(blocks.make_candidate).parameters else {}
    torch.manual_seed(0)
    model = RelaxedStagewiseNetwork(3, 10, init_channels=16, reduction=2, **options).train()
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return digest(loss, model)


def autola(relaxed: bool, channels_last: bool) -> str:
    from attnas.models.hoga_networks import RelaxedHOGANetwork, hoga_network
    from attnas.spaces.hoga import FIGURE3_EDGES

    torch.manual_seed(0)
    model = RelaxedHOGANetwork("resnet20", width=16) if relaxed else hoga_network("resnet20", FIGURE3_EDGES, width=16)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    loss = torch.nn.functional.cross_entropy(model.train()(x), y)
    loss.backward()
    return digest(loss, model)


WORKLOADS: dict[str, Callable[[], str]] = {
    "autoattend_text_supernet": lambda: autoattend("text"),
    "autoattend_graph_supernet": lambda: autoattend("graph"),
    "dvae_elbo": dvae,
    "fullattn_relaxed": fullattn,
    "autola_relaxed": lambda: autola(True, False),
    "autola_relaxed_channels_last": lambda: autola(True, True),
    "autola_discrete": lambda: autola(False, False),
    "autola_discrete_channels_last": lambda: autola(False, True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated subset")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _module("attnas.runs.build", "attnas.build").use_kernels()
    torch.set_num_threads(1)
    out = {name: WORKLOADS[name]() for name in args.only.split(",")}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for name, d in out.items():
            print(name, d)


if __name__ == "__main__":
    main()
