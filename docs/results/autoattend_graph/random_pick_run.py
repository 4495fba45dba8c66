"""Random search's pick under a finished one-shot run's supernet, as a run folder to retrain.

Random search at the evolution's budget, with the same supernet: the best-by-validation of
the N prior samples that ``supernet_score_stability.py`` (or ``supernet_selection_noise.py``)
scored with the run's finished supernet (ties: the earlier sample). ``OUT`` is a copy of the
run's configuration and supernet checkpoint whose ``arch.json`` is that pick, so that

    python -m docs.results.autoattend_graph.random_pick_run runs/swa-cs-s0 --scores runs/stab-swa.jsonl --out runs/swa-cs-s0-random
    attnas --threads 1 retrain runs/swa-cs-s0-random --seeds 10

fine-tunes it from the same supernet weights with the recipe's retraining, as the search's
own architecture is (``attnas retrain runs/swa-cs-s0``). Nothing is trained here.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a finished one-shot run directory")
    p.add_argument("--scores", type=Path, required=True,
                   help="JSON lines with the run's finished-supernet scores of the prior samples")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()

    from attnas.core.arch import Arch
    from attnas.pipeline import open_finished
    from benchmarks._common import best_by_validation, prior_samples

    rows = [json.loads(line) for line in args.scores.read_text().splitlines()]
    rows = [r for r in rows if Path(r["run"]).resolve() == args.run.resolve() and r.get("checkpoint") is None]
    if not rows:
        raise SystemExit(f"{args.scores}: no scores of {args.run}'s finished supernet")
    row = rows[-1]
    _, _, chosen, space = open_finished(args.run)
    archs = prior_samples(space, len(row["val"]), row["sample_seed"])
    best = best_by_validation(row["val"])
    pick = Arch(space.name, archs[best].choices, meta={"strategy": f"best by validation of {len(archs)} prior samples "
                                                               f"(seed {row['sample_seed']}), supernet of {args.run}"})
    if args.out.exists():
        raise SystemExit(f"{args.out} exists")
    args.out.mkdir(parents=True)
    for name in ("config.yaml", "run.json"):
        shutil.copy2(args.run / name, args.out / name)
    (args.out / "checkpoints").mkdir()
    for ck in (args.run / "checkpoints").glob("supernet-*.ckpt"):
        shutil.copy2(ck, args.out / "checkpoints" / ck.name)
    (args.out / "arch.json").write_text(json.dumps(pick.to_dict(), indent=2) + "\n")
    (args.out / "metrics.json").write_text(json.dumps(
        {"arch": space.describe(pick), "val_accuracy_supernet": row["val"][best], "samples": len(archs),
         "search_arch": space.describe(chosen)}, indent=1) + "\n")
    print(f"{args.out}: {space.describe(pick)} (supernet validation {100 * row['val'][best]:.2f}; "
          f"the search chose {space.describe(chosen)})")


if __name__ == "__main__":
    main()
