"""``compare.md`` and ``compare.png``: a comparison's table, verdicts and every seed's score."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnas.runs.atomic_files import atomic_write_file, atomic_write_text  # noqa: E402

FIGURE = "compare.png"


def _pct(x: float, scale: float) -> str:
    return f"{x * scale:.2f}"


def _task_data(task: dict) -> str:
    """What the task reads: ``on `cora` `` for a named dataset, else its other settings (a
    generated task such as ``csbm``: ``with phi=-0.5, graph_seed=0``)."""
    if task.get("dataset"):
        return f"on `{task['dataset']}`"
    settings = ", ".join(f"{k}={v}" for k, v in task.items() if k != "name" and not isinstance(v, (dict, list)))
    return f"with {settings}" if settings else ""


def compare_markdown(result: dict) -> str:
    """The comparison as a Markdown page: the table, the verdicts and the figure."""
    metric, rows = result["metric"], result["rows"]
    scale = 100.0 if all(0 <= s <= 1 for r in rows for s in r["test_per_seed"]) else 1.0
    unit = " (%)" if scale == 100.0 else ""
    task = result["task"]
    k = result.get("search_seeds", 1)
    paper = f" (the paper used {result['paper_seeds']})" if result.get("paper_seeds") else ""
    lines = [f"# Is the search better? `{result['recipe']}`", "",
             f"- task: `{task.get('name')}` {_task_data(task)}, metric: test {metric}"]
    if k > 1:
        lines.append(f"- {k} independent searches per searching row (search seeds; folders "
                     f"{', '.join(f'`{f}/`' for f in result['folders'])}), each row retrained with "
                     f"{result['seeds']} training seeds per search seed, paired across rows{paper}")
    else:
        lines.append(f"- one search per searching row, {result['seeds']} retraining seeds per row, "
                     f"paired across rows{paper}")
    lines += ["- each row's training protocol is in the table (baselines: their own papers'; rows with shared "
              "weights start from them, init `supernet`, the others from scratch)", ""]
    spread = " | test mean per search seed" if k > 1 else ""
    lines += [f"| row | what | test {metric}{unit} mean ± std | 95 % CI | val {metric}{unit} | params | "
              f"search s | training s | training{spread} |",
              "|---|---|---|---|---|---|---|---|---|" + ("---|" if k > 1 else "")]
    for r in rows:
        t, v = r["test"], r["val"]
        params = f"{r['params']:,}" if isinstance(r.get("params"), int) else "-"
        search = f"{r['search_seconds']:.0f}" if r.get("search_seconds") is not None else "-"
        training = f"{r.get('train') or '-'} (init {r['init']})"
        if r.get("still_improving"):
            training += f"; still improving at the end of its budget on {r['still_improving']} of {t['n']} seeds"
        per = (" | " + ", ".join(_pct(x, scale) for x in r["test_per_search"])) if k > 1 else ""
        lines.append(f"| {r['name']} | {r['description']} | {_pct(t['mean'], scale)} ± {_pct(t['std'], scale)} | "
                     f"[{_pct(t['ci95'][0], scale)}, {_pct(t['ci95'][1], scale)}] | "
                     f"{_pct(v['mean'], scale)} ± {_pct(v['std'], scale)} | {params} | {search} | "
                     f"{r['train_seconds']:.0f} | {training}{per} |")
    if k > 1:
        lines += ["", "## Verdicts (paired t-test over search seeds of the per-search means, two-sided, 5 %)", ""]
        lines += [_verdict_line(v) for v in result["verdicts"]]
        lines += ["", "Beside them, the same pairs tested over every training seed pooled (this ignores that "
                  "the seeds of one search share its architecture, so it is too confident where searches differ):",
                  ""]
        lines += [f"- {v['verdict']}: {v['sentence']}" for v in result["training_seed_verdicts"]]
    else:
        lines += ["", "## Verdicts (paired t-test over training seeds, two-sided, 5 %)", ""]
        lines += [_verdict_line(v) for v in result["verdicts"]]
        lines += ["", "These tests are over the training seeds of one search on this one data split: they do not "
                  "cover the search seed, which moves a one-shot search's result more than the training seed "
                  "(`--search-seeds 3` or more gives a verdict over searches)."]
    lines += ["", f"The best baseline is the one with the highest mean validation {metric} "
              f"(`{result['best_baseline']}`); test scores are only reported.",
              "", f"![every seed's score per row]({FIGURE})", "", "## Found architectures", ""]
    for r in rows:
        if r["kind"] != "baseline":
            for i, arch in enumerate(r.get("archs") or [r["arch"]]):
                text = "; ".join(line.strip() for line in str(arch).splitlines() if line.strip())
                label = f"{r['name']} (`{result['folders'][i]}`)" if k > 1 else r["name"]
                lines.append(f"- {label}: `{text}`")
    lines += ["", "Each row is a run directory of this folder (`attnas report <folder>/<row>` draws it).", ""]
    return "\n".join(lines)


def _verdict_line(v: dict) -> str:
    power = v.get("power_half_point")
    extra = ""
    if v["verdict"] != "no verdict" and power is not None and power == power:
        extra = f" (power to detect a 0.5-point difference at this spread: {power:.0%})"
    return f"- **{v['verdict']}**: {v['sentence']}{extra}"


def plot_seeds(result: dict, path: Path) -> None:
    """Every seed's test score per row (lines join the same seed across rows), written atomically.

    Over several search seeds: each search seed's mean over its training seeds.
    """
    rows = result["rows"]
    key = "test_per_search" if result.get("search_seeds", 1) > 1 else "test_per_seed"
    n = len(rows[0][key])
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(rows) + 1.5), 3.8))
    xs = range(len(rows))
    for k in range(n):
        ax.plot(list(xs), [r[key][k] for r in rows], color="0.8", lw=0.7, zorder=1)
    for x, r in zip(xs, rows):
        color = {"search": "tab:red", "random": "tab:orange"}.get(r["kind"], "tab:blue")
        ax.scatter([x] * n, r[key], color=color, s=18, zorder=2)
        ax.hlines(sum(r[key]) / n, x - 0.25, x + 0.25, color=color, lw=2, zorder=3)
    ax.set_xticks(list(xs), [r["name"] for r in rows], rotation=30 if len(rows) > 5 else 0, ha="right" if len(rows) > 5 else "center")
    ax.set_ylabel(f"test {result['metric']}")
    what = f"{n} search seeds (mean of {result['seeds']} training seeds each)" if key == "test_per_search" else f"{n} seeds"
    ax.set_title(f"{result['recipe']}: {what} per row", fontsize=9)
    fig.tight_layout()
    try:
        atomic_write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)


def write_compare_files(out: str | Path, result: dict | None = None) -> Path:
    """Write ``compare.md`` and ``compare.png`` into ``out`` (from ``compare.json`` when ``result`` is None)."""
    out = Path(out)
    if result is None:
        result = json.loads((out / "compare.json").read_text())
    plot_seeds(result, out / FIGURE)
    atomic_write_text(out / "compare.md", compare_markdown(result))
    return out / "compare.md"
