"""Reports of a run: ``report.md`` with a search-progress figure and the architecture drawn.

:func:`write_report` reads only the run directory (config, events, arch, metrics,
retrain summaries), so it works on finished and unfinished runs alike and can be run
again at any time. Every file it writes, figures included, is written to a temporary
file and renamed over the old one (:func:`attnas.runs.atomic_files.atomic_write_file`), so a report
killed half-way leaves the previous files whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402

from attnas.core.arch import Arch  # noqa: E402
from attnas.reporting.display import rounded  # noqa: E402
from attnas.reporting.report_mechanisms import mechanism_section  # noqa: E402
from attnas.reporting.report_pareto import pareto_section  # noqa: E402
from attnas.runs.atomic_files import atomic_write_file, atomic_write_text  # noqa: E402
from attnas.runs.run_dir import RunDir  # noqa: E402


def _moving_average(y: np.ndarray, k: int) -> np.ndarray:
    if len(y) < k or k <= 1:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = (c[k:] - c[:-k]) / k
    return np.concatenate([y[: k - 1], out])


def plot_progress(events: list[dict], path: Path, metric: str = "accuracy") -> bool:
    """Draw the search's progress; returns False when there is nothing to draw.

    Panels, as the events allow: supernet (or other training) loss per epoch; candidate
    scores in evaluation order with the running best; validation score of the final
    training.
    """
    by_phase: dict[str, list[dict]] = {}
    for ev in events:
        by_phase.setdefault(ev.get("phase", ""), []).append(ev)
    panels = []
    for phase, evs in by_phase.items():
        if any(metric in e for e in evs) and any("index" in e for e in evs):
            panels.append(("candidates", phase, evs))
        elif any("loss" in e for e in evs):
            panels.append(("loss", phase, evs))
        if any("val" in e and "epoch" in e for e in evs):
            panels.append(("val", phase, evs))
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    for ax, (kind, phase, evs) in zip(axes[0], panels):
        if kind == "loss":
            pts = [(e.get("epoch", e.get("step", i)), e["loss"]) for i, e in enumerate(evs) if "loss" in e]
            x, y = np.array(pts, dtype=float).T
            ax.plot(x, y, lw=0.6, alpha=0.4, color="tab:blue", label="per epoch")
            k = max(1, len(y) // 50)
            ax.plot(x, _moving_average(y, k), lw=1.5, color="tab:blue", label=f"moving mean ({k})")
            ax.set_xlabel("epoch")
            ax.set_ylabel("training loss")
            ax.set_title(f"{phase}: loss")
            ax.legend(fontsize=7)
        elif kind == "candidates":
            pts = [(e["index"], e[metric], e.get("stage", 0)) for e in evs if metric in e]
            idx, score, stage = np.array(pts, dtype=float).T
            sc = ax.scatter(idx, score, c=stage, s=6, cmap="viridis")
            ax.plot(idx, np.maximum.accumulate(score), color="tab:red", lw=1.5, label="best so far")
            ax.set_xlabel("candidate")
            ax.set_ylabel(f"validation {metric} (shared weights)")
            ax.set_title(f"{phase}: candidates")
            if len(set(stage)) > 1:
                fig.colorbar(sc, ax=ax, label="stage")
            ax.legend(fontsize=7)
        else:
            pts = [(e["epoch"], e["val"]) for e in evs if "val" in e and "epoch" in e]
            x, y = np.array(pts, dtype=float).T
            ax.plot(x, y, color="tab:green")
            ax.set_xlabel("epoch")
            ax.set_ylabel(f"validation {metric}")
            ax.set_title(f"{phase}: validation")
    fig.tight_layout()
    _save(fig, path)
    return True


def _save(fig: Any, path: Path) -> None:
    """Save a figure atomically and close it."""
    try:
        atomic_write_file(path, lambda tmp: fig.savefig(tmp, dpi=120))
    finally:
        plt.close(fig)


def _node_color(label: str) -> str:
    if label in ("input", "output"):
        return "#dddddd"
    if label == "attn":
        return "#f4a261"
    if label == "add":
        return "#8ecae6"
    if label.startswith("zero"):
        return "#ffffff"
    return "#caffbf"


def plot_arch(adj: np.ndarray, labels: list[str], path: Path, title: str = "") -> None:
    """Draw a DAG (from ``space.to_dag``) left to right by topological generation."""
    g = nx.DiGraph()
    for i, lab in enumerate(labels):
        g.add_node(i, label=lab)
    for a, b in zip(*np.nonzero(adj)):
        g.add_edge(int(a), int(b))
    for depth, gen in enumerate(nx.topological_generations(g)):
        for n in gen:
            g.nodes[n]["depth"] = depth
    pos = nx.multipartite_layout(g, subset_key="depth")
    width = 1.6 + 1.4 * (max(nx.get_node_attributes(g, "depth").values()) + 1)
    height = 1.5 + 0.55 * max(len(list(gen)) for gen in nx.topological_generations(g))
    fig, ax = plt.subplots(figsize=(min(width, 40), min(height, 30)))
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=10, edge_color="#555555", node_size=1400)
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=[_node_color(labels[n]) for n in g.nodes], node_size=1400,
                           edgecolors="#333333")
    nx.draw_networkx_labels(g, pos, labels={n: labels[n].replace("@", "\n@") for n in g.nodes}, font_size=7, ax=ax)
    ax.set_title(title, fontsize=9)
    ax.margins(0.12)
    ax.axis("off")
    fig.tight_layout()
    _save(fig, path)


def rerank_section(events: list[dict], space: Any, run: RunDir, metric: str) -> list[str]:
    """Markdown (and ``rerank.png``) comparing the supernet's score of the best candidates with
    their score after re-ranking (fine-tuning from supernet weights), so that a reader sees
    whether the supernet's order held; empty when the run has no re-ranking."""
    rows = [e for e in events if e.get("phase") == "rerank" and "supernet_score" in e]
    if not rows:
        return []
    chosen = max(range(len(rows)), key=lambda i: (rows[i]["val"], -i))
    lines = ["## Re-ranking", "",
             f"The top {len(rows)} candidates by supernet score, each fine-tuned from the supernet's weights; "
             "the best re-ranked validation score is the search's result.", "",
             f"| supernet rank | architecture | supernet val {metric} | re-ranked val {metric} |", "|---|---|---|---|"]
    for i, e in enumerate(rows):
        desc = space.describe(Arch(space.name, e["arch"])) if "arch" in e else ""
        mark = " **(chosen)**" if i == chosen else ""
        lines.append(f"| {e['index'] + 1} | `{desc}`{mark} | {e['supernet_score']:.4f} | {e['val']:.4f} |")
    lines += ["", rerank_order_sentence([e["supernet_score"] for e in rows], [e["val"] for e in rows],
                                        rows[chosen]["index"] + 1), ""]
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    ax.scatter([e["supernet_score"] for e in rows], [e["val"] for e in rows], s=18)
    ax.scatter([rows[chosen]["supernet_score"]], [rows[chosen]["val"]], s=60, facecolors="none", edgecolors="tab:red",
               label="chosen")
    ax.set_xlabel(f"supernet val {metric}")
    ax.set_ylabel(f"re-ranked val {metric}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, run.file("rerank.png"))
    return lines + ["![re-ranking](rerank.png)", ""]


def rerank_order_sentence(supernet: list[float], reranked: list[float], chosen_rank: int) -> str:
    """Whether the re-ranking kept the supernet's choice, and Kendall's tau-b between the two
    orders (Kendall, Biometrika 1938) where it is defined.

    Args:
        supernet: The candidates' supernet scores.
        reranked: Their scores after re-ranking, in the same order.
        chosen_rank: The supernet rank (1: its best) of the candidate the re-ranking chose.
    """
    if chosen_rank == 1:
        choice = "The re-ranking kept the supernet's first choice."
    else:
        choice = f"The re-ranking chose the supernet's rank {chosen_rank}, not its first choice."
    if len(supernet) < 2:
        return choice
    equal = [what for what, xs in (("supernet", supernet), ("re-ranked", reranked)) if len(set(xs)) == 1]
    if equal:
        return (f"{choice} Kendall's tau between the two orders is undefined: the {' and the '.join(equal)} "
                f"scores of the {len(supernet)} candidates are all equal.")
    from scipy import stats

    tau = float(stats.kendalltau(supernet, reranked).statistic)
    return (f"{choice} Kendall's tau between the two orders over {len(supernet)} candidates: {tau:.2f} "
            "(1: the same order, -1: the reverse).")


def top_candidates_section(events: list[dict], space: Any, chosen: Arch | None, metric: str,
                           top_k: int) -> list[str]:
    """Markdown listing a one-shot run's best ``top_k`` candidates by supernet score, for
    runs that choose without re-ranking (``rerank.epochs: 0``), so that a reader sees how
    close the runners-up were; empty when the run has re-ranking events or no scored
    candidates."""
    if any(e.get("phase") == "rerank" for e in events):
        return []
    scored = [e for e in events if e.get("phase") == "evolution" and metric in e and "arch" in e]
    if not scored:
        return []
    best = sorted(scored, key=lambda e: -e[metric])[:max(1, top_k)]
    lines = ["## Best candidates", "",
             f"The top {len(best)} of {len(scored)} scored candidates by supernet validation {metric} "
             "(the search keeps the first; no re-ranking).", "",
             f"| rank | architecture | supernet val {metric} |", "|---|---|---|"]
    for i, e in enumerate(best):
        mark = " **(chosen)**" if chosen is not None and e["arch"] == chosen.choices else ""
        lines.append(f"| {i + 1} | `{space.describe(Arch(space.name, e['arch']))}`{mark} | {e[metric]:.4f} |")
    return lines + [""]


def _table(rows: dict[str, Any]) -> str:
    out = ["| key | value |", "|---|---|"]
    for k, v in rows.items():
        if isinstance(v, float):
            v = f"{v:.4f}"
        elif isinstance(v, (list, tuple, dict)):
            v = json.dumps(rounded(v))
        out.append(f"| {k} | {v} |")
    return "\n".join(out)


def write_report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and its figures into the run directory; returns the report's path.

    For a comparison folder (``attnas compare``) the report is its table, verdicts and figure.
    """
    from attnas.runs.build import build_space
    from attnas.config import config_from_dict
    from attnas.config.yaml_loading import dump_yaml

    if (Path(run_dir) / "compare.json").exists():
        from attnas.comparison.report import write_compare_files

        path = Path(run_dir) / "report.md"
        atomic_write_text(path, write_compare_files(run_dir).read_text())
        return path

    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    space = build_space(config)
    info = run.read_json(RunDir.RUN) if run.exists(RunDir.RUN) else {}
    metrics = run.read_json(RunDir.METRICS) if run.exists(RunDir.METRICS) else {}
    metric = next((k[len("test_"):] for k in metrics if k.startswith("test_")), "accuracy")
    lines = [f"# attnas run: {config.name}", ""]
    if config.description:
        lines += [config.description, ""]
    lines += [f"- run directory: `{run.path.name}`", f"- status: {info.get('status', 'unknown')}",
              f"- task: `{config.task.name}` ({config.task.get('dataset', '')}), space: `{config.space.name}`, "
              f"strategy: `{config.strategy.name}`, seed: {config.seed}", ""]
    if metrics:
        lines += ["## Metrics", "", _table({k: v for k, v in metrics.items()
                                            if k not in ("arch", "mechanism_costs", "mechanism_costs_input")}), ""]
        lines += mechanism_section(metrics)  # a mechanism search's drop scores beside its costs
    arch = None
    if run.exists(RunDir.ARCH):
        arch = Arch.from_json(run.file(RunDir.ARCH).read_text(), source="arch.json")
        lines += ["## Architecture", "", f"`{space.describe(arch)}`", ""]
        try:
            if callable(getattr(space, "draw", None)):  # a space's own drawing (e.g. HOGA like AutoLA's Fig. 3)
                atomic_write_file(run.file("architecture.png"), lambda tmp: space.draw(arch, tmp, config.name))
            else:
                adj, labels = space.to_dag(arch)
                plot_arch(adj, labels, run.file("architecture.png"), space.describe(arch)[:160])
            lines += ["![architecture](architecture.png)", ""]
        except Exception as exc:  # noqa: BLE001 - a space without to_dag still gets a report
            lines += [f"(no drawing: {exc})", ""]
        lines += ["```json", json.dumps(rounded(arch.to_dict()), indent=1), "```", ""]
    events = run.events()
    if plot_progress(events, run.file("search_progress.png"), metric):
        lines += ["## Search progress", "", "![search progress](search_progress.png)", ""]
    lines += rerank_section(events, space, run, metric)
    rerank = getattr(config.strategy.options, "rerank", None)
    lines += top_candidates_section(events, space, arch, metric, rerank.top_k if rerank is not None else 10)
    lines += pareto_section(run, space)  # a cost-aware search's front, if it has one
    retrain_dir = run.path / "retrain"
    if retrain_dir.exists():
        lines += ["## Retraining", ""]
        for summary in sorted(retrain_dir.glob("*/*/summary.json")):
            s = json.loads(summary.read_text())
            m = f"test_{metric}"
            lines.append(f"- {s['dataset']}: test {metric} {s.get(m + '_mean', float('nan')):.4f} "
                         f"± {s.get(m + '_std', float('nan')):.4f} over {s['seeds']} seeds (init: {s['init']})")
        lines.append("")
    lines += ["## Configuration", "", "```yaml", dump_yaml(relative_paths(config.to_dict(), run.path)).rstrip(), "```",
              ""]
    path = run.file("report.md")
    run.write_text("report.md", "\n".join(lines).replace(str(run.path), "."))
    return path


def relative_paths(data: Any, folder: Path) -> Any:
    """``data`` (plain data) with every absolute path of an existing file or folder written
    relative to ``folder``, so that a report stays valid when its run folder is moved or shared."""
    if isinstance(data, dict):
        return {k: relative_paths(v, folder) for k, v in data.items()}
    if isinstance(data, list):
        return [relative_paths(v, folder) for v in data]
    if isinstance(data, str) and os.path.isabs(data) and os.path.exists(data):
        return os.path.relpath(data, folder)
    return data
