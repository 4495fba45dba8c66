"""Do the attention layers of an AutoAttend graph architecture attend, or average?

Eq. 8 weights each neighbour ``u`` of ``v`` by ``softmax_u(q_v . k_u / sqrt(d/h))``. When the
query and key connections output near-zero vectors the energies vanish and the layer is the
plain mean of the value connection over each neighbourhood: the Q and K operations then do
not matter, and candidates that differ only in them tie in the supernet's score. For the
architecture a finished one-shot run found, this prints per attention layer the mean |q| and
|k|, the spread of the energies and the mean distance of the coefficients from the uniform
weights 1/deg (with ``space.qk_norm``, of the normalised q and k), with the supernet's weights and after a training from scratch with the run's
``retrain`` protocol (``--retrain KEY=VALUE`` replaces its fields, e.g. ``weight_decay=0``).

Usage::

    python -m docs.results.autoattend_graph.attention_collapse_probe runs/t5/cora-s0/search
    python -m docs.results.autoattend_graph.attention_collapse_probe runs/t5/cora-s0/search --retrain weight_decay=0
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch
import yaml


def _probe(model: torch.nn.Module, forward, stats: list) -> None:
    from torch_geometric.utils import softmax

    from attnas.ops.autoattend.graph_attention import EdgeScaledDotProductAttention

    def hook(mod, args, out):
        q, k, _, ctx = args
        n = q.shape[0]
        dst = ctx.edge_index_with_self_loops[1]
        energy = mod.energies(q, k, ctx)  # the layer's own (with qk_norm: of the normalised q and k)
        alpha = softmax(energy, dst, num_nodes=n)
        uniform = 1.0 / torch.zeros(n).index_add_(0, dst, torch.ones(len(dst)))[dst]
        stats.append({"|q|": q.abs().mean().item(), "|k|": k.abs().mean().item(), "energy std": energy.std().item(),
                      "|alpha - 1/deg|": (alpha - uniform.unsqueeze(-1)).abs().mean().item()})

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, EdgeScaledDotProductAttention)]
    model.eval()
    try:
        with torch.no_grad():
            forward()
    finally:
        for handle in handles:
            handle.remove()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--retrain", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from attnas.pipeline import train_final
    from benchmarks._common import open_search

    found = open_search(args.run_dir)
    config, arch, space, task, supernet = found.config, found.chosen, found.space, found.task, found.supernet
    batch = next(iter(task.batches("val")))
    print(space.describe(arch))
    stats: list = []
    _probe(supernet, lambda: supernet(batch, arch), stats)
    overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.retrain)}
    settings = replace(config.retrain, init="scratch", **overrides)
    res = train_final(None, config, space, task, None, arch, train=settings, seed=args.seed)
    model = space.build(arch, task)
    model.load_state_dict(res.state_dict)
    n = len(stats)
    _probe(model, lambda: model(batch), stats)
    for i, s in enumerate(stats):
        where = "supernet weights" if i < n else f"trained from scratch {overrides or ''}"
        print(f"attention layer {i % max(n, 1) + 1}, {where}: " + ", ".join(f"{k} {v:.4f}" for k, v in s.items()))
    print(f"trained from scratch: val {res.val:.4f}, test {res.test:.4f}")


if __name__ == "__main__":
    main()
