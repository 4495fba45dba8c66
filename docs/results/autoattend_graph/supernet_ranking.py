"""Supernet ranking quality of any one-shot recipe: Kendall's tau and Spearman's rho.

Draws ``--archs`` architectures from the space's prior, scores each with the supernet's
weights and trains each stand-alone from scratch (``--seeds`` seeds, the recipe's
``retrain`` settings), then correlates the two (:mod:`attnas.reporting.ranking`). Resumable: run
the same command again after a kill. Several supernet variants (``--label`` with
``--set``) share the stand-alone results of one ``--out`` folder.

Usage::

    python -m docs.results.autoattend_graph.supernet_ranking --recipe autoattend-cora --out runs/ranking-cora
    python -m docs.results.autoattend_graph.supernet_ranking --recipe autoattend-cora --out runs/ranking-cora \\
        --label nc --set space.context=nc
    python -m docs.results.autoattend_graph.supernet_ranking --recipe autoattend-cora --out runs/ranking-cora \\
        --label search --supernet-from runs/aa-cora
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="autoattend-cora")
    ap.add_argument("--out", required=True)
    ap.add_argument("--archs", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sample-seed", type=int, default=1234)
    ap.add_argument("--label", default="default",
                    help="names this supernet variant; its files use it made a safe file name (../x y -> x-y)")
    ap.add_argument("--supernet-from", default=None, help="a finished search run whose supernet to rank with")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()

    import torch

    from attnas.reporting.ranking import supernet_ranking

    torch.set_num_threads(args.threads)
    summary = supernet_ranking(args.recipe, args.overrides, out=args.out, archs=args.archs, seeds=args.seeds,
                               sample_seed=args.sample_seed, label=args.label, supernet_from=args.supernet_from)
    print(json.dumps({k: summary[k] for k in ("label", "val", "test", "supernet_top1", "standalone_best")}, indent=1))


if __name__ == "__main__":
    main()
