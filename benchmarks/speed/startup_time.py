"""Start-up time of ``attnas show RECIPE``: each shipped recipe in a new Python, repeated.

``attnas show`` loads and validates a recipe, which imports the recipe's task, space and
strategy (and what they import); nothing else runs, so its time is the command line's
start-up. Every repeat runs every recipe once (recipes interleaved, so that a change of the
machine's load spreads over all of them); a recipe's time is the median over the repeats of

- wall: seconds from starting the child to its exit;
- cpu: the child's user + system CPU seconds (``getrusage``), which depends much less on
  what else the machine runs than the wall time does.

The 1-minute load average is read before every child and reported with the CPUs this
process may use. Two reference rows: ``python -c "import torch"`` (the floor: every
component imports torch) and ``attnas --version`` (the command line without a recipe).
Writes ``startup_time.json`` and ``startup_time.md`` to ``--out``.

    python -m benchmarks.speed.startup_time --out runs/startup --repeats 5
    python -m benchmarks.speed.startup_time --recipes autola-digits-quick,transformer-sst5

Run from the repository root: ``python -m attnas`` imports attnas from the working folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

#: The targets of a start-up: under this many seconds for every recipe.
TARGET_S = 2.0


def timed(command: list[str]) -> dict:
    """Run ``command``; its wall seconds, CPU seconds (user + system) and the load average before it."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "load": load}


def summary(runs: list[dict]) -> dict:
    """Medians (and the wall time's range) over a row's repeats."""
    walls = [r["wall"] for r in runs]
    return {"wall_median": round(statistics.median(walls), 3), "wall_min": round(min(walls), 3),
            "wall_max": round(max(walls), 3), "cpu_median": round(statistics.median(r["cpu"] for r in runs), 3),
            "load_median": round(statistics.median(r["load"] for r in runs), 2), "runs": runs}


def markdown(result: dict) -> str:
    """The table of ``result`` with a line saying how many rows meet :data:`TARGET_S`."""
    rows = result["rows"]
    recipes = [name for name in rows if name.startswith("show ")]
    under_wall = sum(rows[n]["wall_median"] < TARGET_S for n in recipes)
    under_cpu = sum(rows[n]["cpu_median"] < TARGET_S for n in recipes)
    lines = [f"`attnas show RECIPE`, median of {result['repeats']} new Pythons per row; "
             f"{result['cpus']} CPUs usable; 1-minute load average {result['load_min']:.2f} to "
             f"{result['load_max']:.2f} while it ran; torch {result['torch']}.",
             "",
             f"Under {TARGET_S:g} s: {under_wall} of {len(recipes)} recipes by wall time, "
             f"{under_cpu} of {len(recipes)} by CPU time.",
             "",
             "| command | wall s (median) | wall s (min..max) | CPU s (median) | load (median) |",
             "|---|---:|---:|---:|---:|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['wall_median']:.2f} | {row['wall_min']:.2f}..{row['wall_max']:.2f} "
                     f"| {row['cpu_median']:.2f} | {row['load_median']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--recipes", default="", help="Comma-separated recipes (default: every shipped recipe).")
    p.add_argument("--out", type=Path, default=Path("runs/startup-time"))
    args = p.parse_args()
    from attnas.config import list_recipes

    recipes = [r.strip() for r in args.recipes.split(",") if r.strip()] or list_recipes()
    commands = {"python -c 'import torch'": [sys.executable, "-c", "import torch"],
                "attnas --version": [sys.executable, "-m", "attnas", "--version"]}
    commands.update({f"show {r}": [sys.executable, "-m", "attnas", "show", r] for r in recipes})
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for i in range(args.repeats):
        for name, command in commands.items():
            runs[name].append(timed(command))
            print(f"repeat {i + 1}/{args.repeats} {name}: {runs[name][-1]['wall']:.2f} s wall, "
                  f"{runs[name][-1]['cpu']:.2f} s CPU, load {runs[name][-1]['load']:.2f}", flush=True)
    loads = [r["load"] for rs in runs.values() for r in rs]
    result = {"repeats": args.repeats, "cpus": len(os.sched_getaffinity(0)), "torch": version("torch"),
              "python": sys.version.split()[0], "load_min": min(loads), "load_max": max(loads),
              "target_s": TARGET_S, "rows": {name: summary(rs) for name, rs in runs.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup_time.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "startup_time.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    main()
