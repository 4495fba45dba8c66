"""The Pareto front of a cost-aware search in ``report.md``: a table and ``pareto.png``.

:func:`pareto_section` reads ``pareto.json`` and the scored candidates of ``events.jsonl``;
a run without ``pareto.json`` (one objective) gets no section.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnas.core.arch import Arch  # noqa: E402
from attnas.costs.config import latency_clause  # noqa: E402
from attnas.costs.pareto import PARETO_FILE, is_metric  # noqa: E402
from attnas.runs.atomic_files import atomic_write_bytes  # noqa: E402
from attnas.runs.run_dir import RunDir  # noqa: E402


def plot_front(front: dict, candidates: list[dict], path: Any) -> None:
    """Draw each cost objective against the validation metric: every scored candidate in
    grey, the front's members in colour joined in cost order, the chosen one circled.

    The figure is written atomically (rendered in memory, then renamed into place).

    Args:
        front: The ``pareto.json`` document.
        candidates: ``{metric_name: value, cost: value, ...}`` of every scored candidate.
        path: The PNG file to write.
    """
    metric = front["metric"]
    costs = [n for n in front["objectives"] if not is_metric(n)]
    fig, axes = plt.subplots(1, len(costs), figsize=(4.6 * len(costs), 3.6), squeeze=False)
    for ax, cost in zip(axes[0], costs):
        pts = [(c[cost], c[metric]) for c in candidates if cost in c and metric in c]
        if pts:
            x, y = zip(*pts)
            ax.scatter(x, y, s=8, color="#bbbbbb", label="scored candidates")
        members = sorted(front["members"], key=lambda m: m["objectives"][cost])
        fx = [m["objectives"][cost] for m in members]
        fy = [m["objectives"][metric] for m in members]
        ax.plot(fx, fy, "o-", color="tab:blue", ms=4, lw=1, label="Pareto front")
        for m in members:
            if m.get("chosen"):
                ax.scatter([m["objectives"][cost]], [m["objectives"][metric]], s=90, facecolors="none",
                           edgecolors="tab:red", label="chosen (arch.json)")
        if cost in ("params", "macs") and max(fx, default=0) / max(min(fx, default=1), 1) > 50:
            ax.set_xscale("log")
        ax.set_xlabel(cost)
        ax.set_ylabel(f"{metric} ({front.get('measured', {}).get('scores', 'shared weights')})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def pareto_section(run: RunDir, space: Any) -> list[str]:
    """Markdown lines of the front (and ``pareto.png``); empty when the run has no ``pareto.json``.

    Args:
        run: The run directory.
        space: Its space (to describe the members' architectures).
    """
    if not run.exists(PARETO_FILE):
        return []
    front = run.read_json(PARETO_FILE)
    metric, objectives = front["metric"], front["objectives"]
    candidates = []
    for ev in run.events():
        if ev.get("phase") in ("evolution", "query") and "costs" in ev:
            value = next((v for k, v in ev.items() if f"val_{k}" == metric), None)
            if value is not None:
                candidates.append({metric: value, **ev["costs"]})
    limits = ", ".join(f"{k} <= {v:g}" for k, v in front.get("constraints", {}).items())
    measured = front.get("measured", {})
    timed = latency_clause((measured.get("protocol") or {}).get("latency"),
                           "latency_ms" in objectives or "latency_ms" in front.get("constraints", {}))
    lines = ["## Pareto front", "",
             f"{len(front['members'])} architectures of {len(candidates) or 'the'} scored candidates that no other "
             f"beats on every objective ({', '.join(objectives)}; {metric} up, costs down)"
             + (f", under the constraints {limits}" if limits else "") + ". Costs measured on "
             f"`{measured.get('device', '?')}` with {measured.get('threads', '?')} torch threads{timed}. "
             "`attnas export RUN --pick INDEX` (or e.g. `--pick \"latency_ms<5\"`) writes a member's arch.json.", "",
             "| # | " + " | ".join(objectives) + " | architecture |", "|---" * (len(objectives) + 2) + "|"]
    for m in front["members"]:
        desc = space.describe(Arch(m["arch"]["space"], m["arch"]["choices"]))
        values = " | ".join(f"{m['objectives'][n]:.4f}" if is_metric(n) else f"{m['objectives'][n]:g}"
                            for n in objectives)
        lines.append(f"| {m['index']} | {values} | `{desc}`{' **(chosen)**' if m.get('chosen') else ''} |")
    plot_front(front, candidates, run.file("pareto.png"))
    return lines + ["", "![Pareto front](pareto.png)", ""]
