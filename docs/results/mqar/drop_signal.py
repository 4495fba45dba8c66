"""Does a supernet score rank the mechanisms better in validation loss, or with one block kept alone?

DARTFormer scores a block by the validation accuracy lost when its output is zeroed
(masked validation accuracy, Wang et al. 2021). On MQAR the two-layer supernet solves the
task through its linformer blocks alone, so masking any other block costs no accuracy and
ten scores tie at zero. This study re-scores finished homogeneous searches' supernets
(their kept best-validation weights; nothing is trained) in three signals, all on the
validation sequences:

* accuracy drop: ``acc(all) - acc(block j zeroed)`` (the paper's score, as the search logged it);
* loss drop: ``loss(block j zeroed) - loss(all)``, the mean cross-entropy over the query
  positions (a graded signal that separates blocks whose masking costs no argmax hit);
* kept alone: ``acc(every block but j zeroed)``, how well block ``j`` does the task inside
  the supernet without the others (the single-path evaluation of one-shot NAS, Bender et
  al. 2018, applied to the paper's supernet).

and reports each signal's Spearman rho against the mechanisms' stand-alone accuracy
(``--alone``: a folder of one finished ``fixed``-strategy run per mechanism, named by the
mechanism; validation accuracy decides, test accuracy is printed beside it).

Run as ``python -m docs.results.mqar.drop_signal SEARCH_RUN... --alone FIXED_DIR [--json F]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def drop_scores(run_dir: str) -> dict[str, dict[str, float]]:
    """``{"accuracy": {block: drop}, "loss": {block: drop}, "kept_alone": {block: accuracy}, "base": ..}``
    of ``run_dir``'s supernet on validation."""
    from attnas.strategies._mechanism_selection import masked_sums
    from benchmarks._common import open_search

    found = open_search(run_dir)
    model, _ = found.strategy.train_supernet()  # reloads the finished supernet; trains nothing
    task = found.task
    names = list(model.active_names)
    patterns: list[list[str]] = [[], *([n] for n in names), *([m for m in names if m != n] for n in names)]
    batch_size = found.strategy.options.score_batch_size or found.strategy.options.supernet.optim.batch_size

    def measure(output, batch) -> tuple[float, float, float]:  # correct, queries, summed loss
        correct, n = task.count_correct(output, batch)
        return correct, n, float(task.loss(output, batch)) * n

    # as the search scores: evaluation mode, random features and hash rotations frozen
    sums = masked_sums(model, lambda: task.batches("val", batch_size=batch_size), patterns, measure)
    acc = [c / n for c, n, _ in sums]
    loss = [s / n for _, n, s in sums]
    k = len(names)
    return {"accuracy": {n: acc[0] - a for n, a in zip(names, acc[1:k + 1])},
            "loss": {n: l_ - loss[0] for n, l_ in zip(names, loss[1:k + 1])},
            "kept_alone": dict(zip(names, acc[k + 1:])),
            "base": {"accuracy": acc[0], "loss": loss[0]}}


def alone_accuracy(folder: Path) -> dict[str, dict[str, float]]:
    """``{mechanism: {"val": .., "test": ..}}`` from the finished fixed runs under ``folder``."""
    out = {}
    for run in sorted(p for p in folder.iterdir() if (p / "metrics.json").exists()):
        m = json.loads((run / "metrics.json").read_text())
        out[run.name] = {"val": float(m["val_accuracy"]), "test": float(m["test_accuracy"])}
    if not out:
        raise SystemExit(f"{folder}: no finished run (no */metrics.json)")
    return out


def main() -> None:
    from scipy.stats import spearmanr

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished homogeneous mechanism-search run folders")
    p.add_argument("--alone", type=Path, required=True, help="folder of fixed-strategy runs, one per mechanism")
    p.add_argument("--json", type=Path, help="also write the scores here")
    args = p.parse_args()
    alone = alone_accuracy(args.alone)
    rows = []
    for run in args.runs:
        scores = drop_scores(run)
        mechs = [m for m in scores["loss"] if m in alone]
        line = [f"{run}: {len(mechs)} mechanisms measured alone"]
        for signal in ("accuracy", "loss", "kept_alone"):
            s = [scores[signal][m] for m in mechs]
            rho_val = spearmanr(s, [alone[m]["val"] for m in mechs])[0]
            rho_test = spearmanr(s, [alone[m]["test"] for m in mechs])[0]
            order = sorted(scores[signal], key=lambda m: -scores[signal][m])
            line.append(f"  {signal}: rho vs alone val {rho_val:.2f}, test {rho_test:.2f}; order "
                        + ", ".join(f"{m} {scores[signal][m]:.4g}" for m in order))
        print("\n".join(line))
        rows.append({"run": run, **scores})
    print("alone (val / test): " + ", ".join(f"{m} {a['val']:.3f}/{a['test']:.3f}" for m, a in alone.items()))
    if args.json:
        args.json.write_text(json.dumps({"alone": alone, "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
