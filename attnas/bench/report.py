"""Writing a bench's results: ``bench.json``, ``bench.md`` and one figure per dataset."""

from __future__ import annotations

import math
from pathlib import Path

from scipy import stats

from attnas.runs.atomic_files import atomic_write_json, atomic_write_text


def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def markdown(summary: dict, seconds: float, seeds: int) -> str:
    """``bench.md``: test of the picks per dataset and budget, paired and pooled tests, inflation."""
    base, strategies, budgets = summary["baseline"], summary["strategies"], summary["budgets"]
    rows = {(r["dataset"], r["strategy"], r["budget"]): r for r in summary["rows"]}
    paired = {(p["dataset"], p["strategy"], p["budget"]): p for p in summary["paired"]}
    lines = [f"# NAS-Bench-Graph bench: {len(strategies)} strategies x {len(summary['datasets'])} datasets x "
             f"{len(budgets)} budgets x {seeds} seeds", "",
             f"Test performance (%) of the architecture each search picked on validation, mean over seeds; "
             f"in brackets the paired difference to {base} (points) and its t-test p-value. "
             f"Computed in {seconds:.1f} s.", ""]
    if summary.get("constraints") or summary.get("objectives"):
        limits = ", ".join(f"{k} <= {v:g}" for k, v in (summary.get("constraints") or {}).items())
        lines += [f"Every strategy searched under the constraints {limits or 'none'}"
                  + (f" with the objectives {', '.join(summary['objectives'])}" if summary.get("objectives") else "")
                  + ".", ""]
    for budget in budgets:
        lines += [f"## {budget} queries", "", "| dataset | " + " | ".join(strategies) + " |",
                  "|---|" + "---:|" * len(strategies)]
        for d in summary["datasets"]:
            cells = []
            for s in strategies:
                r = rows.get((d, s, budget))
                if r is None:
                    cells.append("")
                    continue
                text = f"{100 * r['test']['mean']:.2f}"
                p = paired.get((d, s, budget))
                if p is not None:
                    text += f" ({_pts(p['diff_mean'])}, p={_p(p['p_value'])})"
                cells.append(text)
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"## Pooled over the datasets other than {summary['control']} (per-seed mean)", "",
              "| strategy | budget | test diff (points) | 95 % CI | t-test p | Wilcoxon p | val diff (points) "
              "| datasets better / n.d. / worse |", "|---|---:|---:|---|---:|---:|---:|---|"]
    for p in summary["pooled"]:
        half = stats.t.ppf(0.975, p["n"] - 1) * p["diff_std"] / math.sqrt(p["n"]) if p["n"] > 1 else 0.0
        v = p["per_dataset"]
        lines.append(f"| {p['strategy']} | {p['budget']} | {_pts(p['diff_mean'])} | "
                     f"{_pts(p['diff_mean'] - half)}..{_pts(p['diff_mean'] + half)} | {_p(p['p_value'])} | "
                     f"{_p(p['wilcoxon_p'])} | {_pts(p['val_diff_mean'])} | "
                     f"{v.get('better', 0)} / {v.get('not distinguishable', 0)} / {v.get('worse', 0)} |")
    lines += ["", f"## Rewarding {base} with the test column", "",
              "Best test performance among the queried architectures minus the test performance of the pick on "
              "validation (points; what examples that use `perf` as the reward report on top).", "",
              "| dataset | " + " | ".join(str(b) for b in budgets) + " |", "|---|" + "---:|" * len(budgets)]
    infl = {(i["dataset"], i["budget"]): i for i in summary["inflation"]}
    for d in summary["datasets"]:
        vals = [infl.get((d, b)) for b in budgets]
        lines.append(f"| {d} | " + " | ".join(f"{_pts(i['inflation']['mean'])}" if i else "" for i in vals) + " |")
    if summary.get("fronts"):
        lines += ["", "## Pareto fronts against the true front (validation)", "",
                  "Hypervolume of the found front as a fraction of the table's true front's (normalised "
                  "objectives, reference point 1), mean over seeds; in brackets the paired difference to "
                  f"{base} (points of the fraction) and its t-test p-value. Test performance of the front's "
                  "members (mean) for the record only.", "",
                  "| dataset | strategy | budget | hypervolume ratio | front test (%) | true front size |",
                  "|---|---|---:|---:|---:|---:|"]
        for f in summary["fronts"]:
            diff = (f" ({_pts(f['hv_diff_mean'])}, p={_p(f['hv_p'])})" if "hv_diff_mean" in f else "")
            lines.append(f"| {f['dataset']} | {f['strategy']} | {f['budget']} | {f['hv']['mean']:.4f}{diff} | "
                         f"{100 * f['front_test']['mean']:.2f} | {f['true_front_size']} |")
    lines += ["", "Per-strategy search seconds (all seeds of a cell): "
              + ", ".join(f"{s} {sum(r['seconds'] for r in summary['rows'] if r['strategy'] == s):.1f} s"
                          for s in strategies), ""]
    return "\n".join(lines)


def figure(summary: dict, dataset: str, path: Path) -> None:
    """The anytime curves of one dataset: incumbent test against queries, mean and 95 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy in summary["strategies"]:
        c = summary["curves"].get(f"{dataset}/{strategy}")
        if c is None:
            continue
        q = range(1, len(c["mean"]) + 1)
        ax.plot(q, [100 * m for m in c["mean"]], label=strategy, lw=1.2)
        ax.fill_between(q, [100 * m for m in c["low"]], [100 * m for m in c["high"]], alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("distinct architectures queried")
    ax.set_ylabel("test performance of the incumbent (%)")
    ax.set_title(f"NAS-Bench-Graph {dataset}: picked on validation")
    lows = [100 * v for k, c in summary["curves"].items() if k.startswith(f"{dataset}/") for v in c["mean"][9:]]
    if lows:
        ax.set_ylim(min(lows) - 0.5, max(100 * v for k, c in summary["curves"].items()
                                         if k.startswith(f"{dataset}/") for v in c["high"]) + 0.2)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(out: Path, summary: dict, seconds: float, seeds: int) -> None:
    """``bench.json`` (the summary), ``bench.md`` and ``figures/<dataset>.png``."""
    atomic_write_json(out / "bench.json", {**summary, "seconds": seconds, "seeds": seeds})
    atomic_write_text(out / "bench.md", markdown(summary, seconds, seeds))
    for dataset in summary["datasets"]:
        figure(summary, dataset, out / "figures" / f"{dataset}.png")
