"""Latent BO on the ENAS table against random sampling, at the same number of table lookups.

Issue 23: latent BO (Chatzianastasis et al., 2021, Sec. 4.3) is scored honestly on the 19,020-row ENAS table:
a proposal is scored by table lookup when the table holds it; a proposal outside the table
is counted as *unscored* and never scored by a surrogate. This script measures, over several
seeds, how fast BO finds good architectures of the table compared with random sampling
from the table, both counted in **lookups** (distinct table architectures whose accuracy
was read; a repeat costs nothing).

Per seed:

1. ``--initial`` table architectures are drawn at random and looked up (BO's initial data:
   their latent means and accuracies).
2. ``--rounds`` BO rounds: a sparse GP on ``(z, accuracy)``, a batch of ``--batch`` points by
   expected improvement,

       EI(z) = E[max(0, f(z) - y*)],   f ~ GP posterior, y* = best accuracy so far,

   (BoTorch's Monte-Carlo qEI for the batch), each point decoded ``--decode-attempts`` times;
   with ``--decode in-table`` (default) it keeps its most common valid decoding that the
   table holds, with ``--decode valid`` its most common valid decoding (D-VAE's rule). The
   proposal is looked up in the table, or counted unscored.
   This is Chatzianastasis et al.'s (2021) / D-VAE's protocol (decode, then score).
3. ``pool`` BO (with ``--propose pool`` or ``both``; **not** the paper's protocol, the
   arch2vec-style variant of Yan et al. 2020, ref. [5] of Chatzianastasis et al., 2021): the same GP, but each
   round picks the ``--batch`` not yet looked-up table architectures with the highest
   analytic expected improvement at their latent means (top-``batch`` by EI, no batch
   diversity). Nothing is decoded, so nothing is
   unscored; it shows what the latent space and GP can do when decoding is taken out.
4. Random sampling: the same initial sample, then the rest of the table in a random order.

Reported: the best accuracy after each BO round and, for random sampling, after the same
number of lookups (mean over seeds); the number of lookups each needs to reach a top-1 %
architecture of the table (accuracy >= the 190th best of 19,020); and BO's unscored and
invalid proposals.

The VAE is trained here unsupervised on the 17,118 training graphs of D-VAE's split (no
accuracies) and cached in ``--vae``; its size and training length are arguments. Everything
is on one torch thread unless ``--threads`` says otherwise.

Usage (from the repository root)::

    ATTNAS_DATA=/work/shared/data PYTHONPATH=. python -m docs.results.opemb.bo_vs_random --threads 1 \
        --model dvae --hidden 64 --epochs 3 --seeds 5 --initial 20 --rounds 10 --batch 10 --propose both
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from attnas.graphvae.bo import BOConfig, BOState, latent_bo
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.evaluator import UNSCORED, Evaluation, TableEvaluator
from attnas.graphvae.gp import SparseGPConfig, fit_sparse_gp
from attnas.graphvae.train import VAETrainConfig, fit, new_state
from attnas.graphvae.vae import GraphVAE, paper_model
from attnas.graphvae.validity import is_valid_enas
from attnas.runs.checkpoint_files import load_checkpoint_file, save_checkpoint_file

MODELS = {"dvae": "D-VAE", "dvae-emb": "DVAE-EMB", "gcn": "GCN", "gcn-emb": "GCN-EMB"}


class CountingTable:
    """A :class:`TableEvaluator` that records every distinct architecture it reads (a lookup).

    Args:
        table: The table evaluator (no fallback: outside the table is unscored).
        keys_read: Keys already looked up (e.g. the initial sample), in order.
    """

    def __init__(self, table: TableEvaluator, keys_read: list[str]):
        self.table = table
        self.read = list(keys_read)
        self.seen = set(keys_read)

    def evaluate(self, graphs: DagBatch) -> list[Evaluation]:
        out = self.table.evaluate(graphs)
        for key, ans in zip(graphs.keys(), out):
            if ans.source != UNSCORED and key not in self.seen:
                self.seen.add(key)
                self.read.append(key)
        return out


def get_vae(args, train) -> GraphVAE:
    """Train the VAE (or load it from ``args.vae`` when it was trained with the same settings)."""
    spec = {"model": args.model, "hidden": args.hidden, "latent": args.latent, "epochs": args.epochs, "lr": args.lr,
            "seed": args.vae_seed}
    path = Path(args.vae)
    if path.exists():
        ck = load_checkpoint_file(path)
        if ck["spec"] == spec:
            model = GraphVAE.from_arguments(ck["model_args"])
            model.load_state_dict(ck["model"])
            print(f"VAE loaded from {path} ({ck['seconds']} s of training)")
            return model.eval()
    config = paper_model(MODELS[args.model], hidden=args.hidden, latent=args.latent)
    settings = VAETrainConfig(epochs=args.epochs, batch_size=32, lr=args.lr, seed=args.vae_seed)
    t = time.time()
    state = fit(new_state(config, train.num_types, train.max_nodes, settings), train, description="VAE")
    seconds = round(time.time() - t, 1)
    print(f"VAE trained: {MODELS[args.model]}, {args.epochs} epochs, {seconds} s, "
          f"loss/graph {[round(h['loss'], 3) for h in state.history]}")
    save_checkpoint_file(path, {"spec": spec, "model_args": state.model.arguments(), "model": state.model.state_dict(),
                                "seconds": seconds})
    return state.model.eval()


def first_hit(values: list[float], threshold: float) -> int | None:
    """1-based position of the first value >= threshold, or None."""
    return next((i + 1 for i, v in enumerate(values) if v >= threshold), None)


@torch.no_grad()
def expected_improvement(gp, z, best: float) -> torch.Tensor:
    """Analytic EI of the latent function at every row of ``z`` (standardised units)::

        EI = sigma (u Phi(u) + phi(u)),  u = (mu - best) / sigma

    with the GP's posterior mean ``mu`` and standard deviation ``sigma`` of f (no observation
    noise); computed for all points at once (BoTorch's analytic acquisition evaluates them as
    a batch of single-point posteriors, which is far slower here). Points whose EI underflows
    to 0 are ranked by ``u``: the returned score is ``EI + 1e-300 * sigmoid(u)``.
    """
    gp.model.eval()
    mus, sds = [], []
    for chunk in z.split(4096):
        post = gp.model.posterior(chunk.to(torch.float64), observation_noise=False)
        mus.append(post.mean.reshape(-1))
        sds.append(post.variance.reshape(-1).clamp_min(1e-18).sqrt())
    mu, sd = torch.cat(mus), torch.cat(sds)
    u = (mu - best) / sd
    normal = torch.distributions.Normal(0.0, 1.0)
    ei = sd * (u * normal.cdf(u) + normal.log_prob(u).exp())
    return ei + 1e-300 * torch.sigmoid(u)


def pool_bo(table: TableEvaluator, everything, z_all, initial: list[int],
            settings: BOConfig) -> tuple[list[dict], list[float]]:
    """BO over the encoded table (not the paper's protocol): each round, the ``batch_size``
    unread table architectures of highest analytic EI at their latent means.

    Returns:
        One ``{"round", "lookups", "best"}`` per round, and the accuracy of every lookup in order.
    """
    keys = everything.graphs.keys()
    first_of: dict[str, int] = {}
    for i, k in enumerate(keys):
        first_of.setdefault(k, i)
    pool = torch.tensor(sorted(first_of.values()))
    read = {keys[i] for i in initial}
    x = z_all[initial].clone()
    y = torch.tensor([table.table[keys[i]] for i in initial], dtype=torch.float64)
    rounds = []
    for it in range(settings.iterations):
        gp = fit_sparse_gp(x, y, replace(settings.gp, seed=settings.gp.seed + it), description="pool BO GP")
        ei = expected_improvement(gp, z_all[pool], float(gp.standardize(y).max()))
        ei[torch.tensor([keys[int(i)] in read for i in pool])] = -float("inf")
        pick = pool[torch.topk(ei, settings.batch_size).indices]
        for i in pick.tolist():
            read.add(keys[i])
        x = torch.cat([x, z_all[pick]])
        y = torch.cat([y, torch.tensor([table.table[keys[i]] for i in pick.tolist()], dtype=torch.float64)])
        rounds.append({"round": it + 1, "lookups": len(y), "best": float(y.max())})
    return rounds, y.tolist()


def run_seed(model, table: TableEvaluator, everything, z_all, threshold, args, seed) -> dict:
    """One seed of decode BO, pool BO and random sampling (same initial sample for both BOs)."""
    rng = random.Random(seed)
    n = len(everything)
    keys = everything.graphs.keys()
    initial = rng.sample(range(n), args.initial)
    settings = BOConfig(iterations=args.rounds, batch_size=args.batch, decode_attempts=args.decode_attempts,
                          num_restarts=args.num_restarts, raw_samples=args.raw_samples, mc_samples=args.mc_samples,
                          maxiter=args.maxiter, sequential=False, seed=seed, unscored=args.unscored,
                          gp=SparseGPConfig(inducing=args.inducing, epochs=args.gp_epochs, batch_size=1000, lr=0.01,
                                             method=args.gp_method, maxiter=args.gp_maxiter))
    rest = sorted(set(range(n)) - set(initial))
    random.Random(10_000 + seed).shuffle(rest)
    perm = initial + rest  # random sampling continues from the same initial sample
    rand_values = [float(everything.y[i]) for i in perm]
    init_values = [table.table[keys[i]] for i in initial]
    out = {"seed": seed, "initial_best": max(init_values), "random_hit": first_hit(rand_values, threshold),
           "random_initial_best": max(rand_values[: args.initial])}
    if args.propose in ("decode", "both"):
        counter = CountingTable(table, [keys[i] for i in initial])
        values_read = list(init_values)  # accuracy of each lookup, in order
        state = BOState.start(z_all[initial], torch.tensor(values_read, dtype=torch.float64), seed)
        rounds = []

        def on_iteration(it, props):
            for key in counter.read[len(values_read):]:
                values_read.append(table.table[key])
            rounds.append({"round": it + 1, "lookups": len(values_read), "best": max(values_read),
                           "unscored": sum(p.source == UNSCORED for p in props),
                           "invalid": sum(p.source == "invalid" for p in props),
                           "random_best": max(rand_values[: len(values_read)])})

        prefer = table.contains if args.decode == "in-table" else None
        t = time.time()
        latent_bo(model, state.x, state.y, counter, lambda b: is_valid_enas(b, n_nodes=8), settings, on_iteration,
                  state, prefer=prefer)
        out["decode"] = {"rounds": rounds, "lookups": len(values_read), "hit": first_hit(values_read, threshold),
                         "seconds": round(time.time() - t, 1)}
    if args.propose in ("pool", "both"):
        t = time.time()
        rounds, values = pool_bo(table, everything, z_all, initial, settings)
        for r in rounds:
            r["random_best"] = max(rand_values[: r["lookups"]])
        out["pool"] = {"rounds": rounds, "lookups": len(values), "hit": first_hit(values, threshold),
                       "seconds": round(time.time() - t, 1)}
    return out


def report(results: list[dict], method: str, args) -> None:
    """Print the per-round table and the lookups to a top-1 % architecture of one BO variant."""
    runs = [r[method] for r in results]
    print(f"\n{method} BO ({args.gp_method} GP), mean over {len(results)} seeds (initial {args.initial} random lookups, "
          f"batch {args.batch}"
          + (f", decode {args.decode}, {args.decode_attempts} decodings per point, unscored -> {args.unscored})"
             if method == "decode" else ")") + ":")
    print("| BO round | lookups (mean) | BO best accuracy | random best at the same lookups |"
          + (" unscored / invalid proposals |" if method == "decode" else ""))
    print("|---|---|---|---|" + ("---|" if method == "decode" else ""))
    print(f"| 0 (initial) | {args.initial} | {statistics.mean(r['initial_best'] for r in results):.4f} | "
          f"{statistics.mean(r['random_initial_best'] for r in results):.4f} |" + (" - |" if method == "decode" else ""))
    for k in range(args.rounds):
        rows = [run["rounds"][k] for run in runs if len(run["rounds"]) > k]
        line = (f"| {k + 1} | {statistics.mean(x['lookups'] for x in rows):.1f} | "
                f"{statistics.mean(x['best'] for x in rows):.4f} | {statistics.mean(x['random_best'] for x in rows):.4f} |")
        if method == "decode":
            line += f" {sum(x['unscored'] for x in rows)} / {sum(x['invalid'] for x in rows)} |"
        print(line)
    hits = [run["hit"] for run in runs]
    found = [h for h in hits if h is not None]
    print(f"lookups to the first top-1 % architecture, per seed: {method} BO {hits} (None: not within its "
          f"{[run['lookups'] for run in runs]} lookups), random {[r['random_hit'] for r in results]}")
    print(f"{method} BO found one in {len(found)}/{len(runs)} seeds"
          + (f", mean {statistics.mean(found):.1f} lookups where found" if found else "")
          + f"; random: mean {statistics.mean(r['random_hit'] for r in results):.1f} lookups; "
          f"{method} BO seconds per seed {[run['seconds'] for run in runs]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", choices=list(MODELS), default="dvae")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--latent", type=int, default=56)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--vae-seed", type=int, default=0)
    ap.add_argument("--vae", default="/tmp/opemb_bo_vae.pt", help="VAE cache file")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--initial", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--propose", choices=["decode", "pool", "both"], default="both")
    ap.add_argument("--decode", choices=["in-table", "valid"], default="in-table")
    ap.add_argument("--decode-attempts", type=int, default=50)
    ap.add_argument("--unscored", choices=["worst", "skip"], default="worst")
    ap.add_argument("--inducing", type=int, default=500)
    ap.add_argument("--gp-epochs", type=int, default=100, help="SVGP epochs")
    ap.add_argument("--gp-method", choices=["svgp", "fitc", "sgpr"], default="svgp",
                    help="the BO's sparse GP (fitc with at least as many inducing points as data is the exact GP)")
    ap.add_argument("--gp-maxiter", type=int, default=100, help="L-BFGS-B iterations of fitc / sgpr")
    ap.add_argument("--num-restarts", type=int, default=2)
    ap.add_argument("--raw-samples", type=int, default=256)
    ap.add_argument("--mc-samples", type=int, default=64)
    ap.add_argument("--maxiter", type=int, default=50)
    ap.add_argument("--json", default=None, help="write the per-seed results here")
    args = ap.parse_args(argv)
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("ATTNAS_PROGRESS", "0")
    from attnas.data.enas import load_enas6

    load0, t0, c0 = os.getloadavg(), time.time(), time.process_time()
    data = load_enas6()
    everything = DagDataset(DagBatch.cat([data.train.graphs, data.test.graphs]), torch.cat([data.train.y, data.test.y]),
                            data.train.vocab)
    model = get_vae(args, data.train)
    z_all = model.latent_means(everything.graphs).double()
    table = TableEvaluator.from_dataset(everything)  # no fallback
    y_sorted = sorted(everything.y.tolist(), reverse=True)
    top = max(1, round(0.01 * len(y_sorted)))
    threshold = y_sorted[top - 1]
    print(f"{len(everything)} table rows ({len(table.table)} distinct), top 1 %: {top} rows with accuracy >= "
          f"{threshold:.4f}; best {y_sorted[0]:.4f}; random sampling needs (N+1)/(K+1) = "
          f"{(len(y_sorted) + 1) / (top + 1):.1f} lookups on average to find one")
    results = []
    for s in range(args.seeds):
        r = run_seed(model, table, everything, z_all, threshold, args, s)
        results.append(r)
        line = f"seed {s}: random top-1 % after {r['random_hit']} lookups"
        for m in ("decode", "pool"):
            if m in r:
                line += (f"; {m} BO: {r[m]['lookups']} lookups, best {r[m]['rounds'][-1]['best']:.4f} (random "
                         f"{r[m]['rounds'][-1]['random_best']:.4f}), top-1 % after {r[m]['hit']}")
                if m == "decode":
                    line += (f", unscored {sum(x['unscored'] for x in r[m]['rounds'])}, "
                             f"invalid {sum(x['invalid'] for x in r[m]['rounds'])}")
                line += f", {r[m]['seconds']} s"
        print(line, flush=True)
    for m in ("decode", "pool"):
        if m in results[0]:
            report(results, m, args)
    print(f"wall {time.time() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s, load {load0} -> {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "threshold": threshold, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
