"""The hybrid search against random search of docs/results/mqar.md, per search seed.

Usage (from the repository root)::

    python -m docs.results.mqar.hybrid_search COMPARE_FOLDER

``COMPARE_FOLDER`` is the folder of ``attnas compare hybrid-mqar-hard-evolution
--search-seeds K --baselines softmax`` (one ``search-seed-<s>/`` per search seed, each with
the rows ``search`` (``evolution-trained``), ``random`` (``random-trained`` with as many
trained hybrids) and ``softmax``, and its ``compare.json``). Prints Markdown, one line per
search seed and row: the pick (the best validation accuracy among its trained hybrids), that
validation accuracy, which trained hybrid was the first at >= 95 % validation accuracy, the
pick's test accuracy once retrained (the compare's row; test only reported), and the pick's
latency as a fraction of softmax's. Two fractions: the one the search
admitted it with (softmax timed beside it, ``relative`` of its event), and one from timing
every pick and softmax again here, all in one process in interleaved rounds
(:func:`docs.results.mqar.hybrid_front.time_together`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from attnas.config import load_config
from docs.results.mqar.hybrid_front import layers, time_together, trained

#: Validation accuracy counted as solving the task (>= 95 % of softmax's 100 %).
SOLVED = 0.95
ROWS = ("search", "random")


def row_summary(folder: Path, depth: int) -> dict:
    """One search row's pick, its validation accuracy, admitted latency fraction and first solving candidate."""
    events = trained(folder)
    best = max(events, key=lambda e: e["val_accuracy"])  # first of ties, as the strategies pick
    first = next((i + 1 for i, e in enumerate(events) if e["val_accuracy"] >= SOLVED), None)
    return {"pick": layers(best["arch"], depth), "val": best["val_accuracy"], "first": first,
            "admitted": best["relative"]["latency_ms"], "trained": len(events)}


def main(folder: str) -> None:
    torch.set_num_threads(1)
    top = Path(folder)
    seed_dirs = sorted(top.glob("search-seed-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    config = load_config(str(seed_dirs[0] / "search" / "config.yaml"))
    depth = config.space.options.depth
    lines = []
    for d in seed_dirs:
        test = {r["name"]: r["test"]["mean"] for r in json.loads((d / "compare.json").read_text())["rows"]}
        lines.append((d.name.rsplit("-", 1)[1], {name: {**row_summary(d / name, depth), "test": test[name]}
                                                 for name in ROWS}, test["softmax"]))
    soft = ("softmax",) * depth
    latency = time_together(config, list({soft, *(r["pick"] for _, rows, _ in lines for r in rows.values())}))
    print("| search seed | row | pick | validation [%] | first >= 95 % validation | test [%] | "
          "softmax test [%] | latency / softmax's (admitted) | (timed together) |\n|---|---|---|---|---|---|---|---|---|")
    for seed, rows, soft_test in lines:
        for name, r in rows.items():
            first = f"candidate {r['first']} of {r['trained']}" if r["first"] else f"none of {r['trained']}"
            print(f"| {seed} | {name} | {' / '.join(f'`{m}`' for m in r['pick'])} | {100 * r['val']:.1f} | {first} | "
                  f"{100 * r['test']:.1f} | {100 * soft_test:.1f} | {r['admitted']:.2f} | "
                  f"{latency[r['pick']] / latency[soft]:.2f} |")
    print(f"\nsoftmax timed together: {latency[soft]:.1f} ms at {config.strategy.options.costs.task.get('seq_len')} "
          "tokens")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
