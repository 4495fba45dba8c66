"""Correctness check of the graph VAEs: each of Chatzianastasis et al.'s (2021) four models overfits a small set.

Issue 23's fast check before any long run: D-VAE, DVAE-EMB, GCN and GCN-EMB are each trained
on the first ``--graphs`` ENAS training architectures until they reconstruct every one of them
(D-VAE's reconstruction accuracy, Chatzianastasis et al., 2021, Table 1: the posterior mean of each graph decoded
``--decodes`` times stochastically, the fraction of decodings equal to the input). A model that
cannot reach 100 % on a set this small has a bug, not a training-length problem.

The loss is the negative ELBO of Chatzianastasis et al., 2021, Eq. 1, as D-VAE trains it::

    L = -E_q[log p(A, X | z)] + beta * KL(q(z | A, X) || N(0, I))

Usage (from the repository root)::

    ATTNAS_DATA=/work/shared/data PYTHONPATH=. python -m docs.results.opemb.overfit --threads 1 \
        [--graphs 100] [--hidden 128] [--latent 56] [--lr 1e-3] [--batch-size 32] [--max-epochs 300] \
        [--models D-VAE DVAE-EMB GCN GCN-EMB] [--check-every 10] [--decodes 10]

Prints, per model, the epoch at which the stochastic reconstruction accuracy first reached
``--target`` (default 1.0), the wall and CPU time to get there and the final loss.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.metrics import reconstruction_accuracy, same_dag
from attnas.graphvae.train import VAETrainConfig, new_state, train_epoch
from attnas.graphvae.vae import PAPER_MODELS, paper_model


def overfit(data: DagDataset, model_name: str, hidden: int, latent: int, lr: float, batch_size: int,
            max_epochs: int, check_every: int, decodes: int, target: float = 1.0, seed: int = 0,
            log=print) -> dict:
    """Train one model on ``data`` until its reconstruction accuracy reaches ``target``.

    Args:
        data: The graphs to overfit.
        model_name: One of :data:`~attnas.graphvae.vae.PAPER_MODELS`.
        hidden: Hidden size.
        latent: Latent size.
        lr: Adam learning rate.
        batch_size: Graphs per batch.
        max_epochs: Give up after this many epochs.
        check_every: Epochs between accuracy checks.
        decodes: Stochastic decodings per graph in each check.
        target: Reconstruction accuracy to reach.
        seed: Seed of the initialisation, batch order and decoding.
        log: Called with a progress line after each check.

    Returns:
        ``epochs`` (to reach the target, or ``max_epochs``), ``recon_accuracy`` (stochastic),
        ``greedy_accuracy`` (argmax decoding), ``loss`` and ``recon`` (per graph),
        ``first_greedy_1`` and ``first_stochastic_099`` (first checked epoch where the greedy
        decoding reconstructed every graph / the stochastic accuracy reached 0.99), ``reached``,
        ``seconds``, ``cpu_seconds``.
    """
    config = paper_model(model_name, hidden=hidden, latent=latent)
    settings = VAETrainConfig(epochs=max_epochs, batch_size=batch_size, lr=lr, seed=seed,
                             plateau_patience=max_epochs)  # no learning-rate decay while overfitting
    state = new_state(config, data.num_types, data.max_nodes, settings)
    gen = torch.Generator().manual_seed(seed)
    t0, c0 = time.time(), time.process_time()
    acc = greedy = 0.0
    rec = {"loss": float("nan"), "recon": float("nan"), "kld": float("nan")}
    epoch = 0
    first: dict[str, int | None] = {"greedy_1": None, "stochastic_099": None}
    for epoch in range(1, max_epochs + 1):
        rec = train_epoch(state, data)
        if epoch % check_every and epoch != max_epochs:
            continue
        model = state.model
        model.eval()
        mu, _ = model.encode(data.graphs)
        greedy = float(same_dag(data.graphs, model.decode(mu, stochastic=False)).float().mean())
        acc = reconstruction_accuracy(model, data.graphs, 1, decodes, generator=gen)
        model.train()
        if greedy == 1.0 and first["greedy_1"] is None:
            first["greedy_1"] = epoch
        if acc >= 0.99 and first["stochastic_099"] is None:
            first["stochastic_099"] = epoch
        log(f"  {model_name} epoch {epoch:4d} loss/graph {rec['loss']:8.4f} (recon {rec['recon']:.4f}, "
            f"KL {rec['kld']:.2f}) greedy {greedy:.3f} stochastic {acc:.4f} ({time.time() - t0:.0f} s)")
        if acc >= target:
            break
    return {"model": model_name, "epochs": epoch, "recon_accuracy": acc, "greedy_accuracy": greedy,
            "loss": rec["loss"], "recon": rec["recon"], "first_greedy_1": first["greedy_1"],
            "first_stochastic_099": first["stochastic_099"], "reached": acc >= target, "seconds": round(time.time() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--graphs", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--latent", type=int, default=56)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-epochs", type=int, default=300)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--decodes", type=int, default=10)
    ap.add_argument("--target", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=list(PAPER_MODELS), choices=list(PAPER_MODELS))
    args = ap.parse_args(argv)
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(args.threads)
    from attnas.data.enas import load_enas6

    data = load_enas6().train.subset(range(args.graphs))
    print(f"{len(data)} ENAS training graphs, hidden {args.hidden}, latent {args.latent}, lr {args.lr}, "
          f"batch {args.batch_size}, {args.threads} thread(s), load {'%.2f %.2f %.2f' % os.getloadavg()}")
    results = []
    for name in args.models:
        results.append(overfit(data, name, args.hidden, args.latent, args.lr, args.batch_size, args.max_epochs,
                               args.check_every, args.decodes, args.target, args.seed))
    print(f"load {'%.2f %.2f %.2f' % os.getloadavg()}")
    print("| model | reached | epochs | greedy 100 % at | stochastic >= 0.99 at | stochastic recon. acc. | "
          "greedy acc. | loss / recon per graph | wall s | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['reached']} | {r['epochs']} | {r['first_greedy_1']} | {r['first_stochastic_099']} | "
              f"{r['recon_accuracy']:.4f} | {r['greedy_accuracy']:.3f} | {r['loss']:.4f} / {r['recon']:.4f} | "
              f"{r['seconds']} | {r['cpu_seconds']} |")
    return 0 if all(r["reached"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
