"""``compare.md`` and ``compare.png``: a comparison's table, verdicts and every seed's score."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnas.atomic_files import atomic_write_file, atomic_write_text  # noqa: E402

FIGURE = "compare.png"


def _pct(x: float, scale: float) -> str:
    return f"{x * scale:.2f}"


def compare_markdown(result: dict) -> str:
    """The comparison as a Markdown page: the table, the verdicts and the figure."""
    metric, rows = result["metric"], result["rows"]
    scale = 100.0 if all(0 <= s <= 1 for r in rows for s in r["test_per_seed"]) else 1.0
    unit = " (%)" if scale == 100.0 else ""
    task = result["task"]
    rt = result["retrain"]
    finetune = f", lr {rt['finetune_lr']}" if rt.get("finetune_lr") is not None else ""
    paper = f" (the paper used {result['paper_seeds']})" if result.get("paper_seeds") else ""
    lines = [f"# Is the search better? `{result['recipe']}`", "",
             f"- task: `{task.get('name')}` on `{task.get('dataset', '')}`, metric: test {metric}",
             f"- {result['seeds']} retraining seeds per row, paired across rows{paper}",
             f"- one training budget for every row: {rt['epochs']} epochs, {rt['optimizer']} lr {rt['lr']}, "
             f"weight decay {rt['weight_decay']}, patience {rt['patience']}; rows with shared weights "
             f"start from them (init `supernet`{finetune}), the others from scratch",
             "", f"| row | what | test {metric}{unit} mean ± std | 95 % CI | val {metric}{unit} | params | "
             "search s | training s | init |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, v = r["test"], r["val"]
        params = f"{r['params']:,}" if isinstance(r.get("params"), int) else "-"
        search = f"{r['search_seconds']:.0f}" if r.get("search_seconds") is not None else "-"
        lines.append(f"| {r['name']} | {r['description']} | {_pct(t['mean'], scale)} ± {_pct(t['std'], scale)} | "
                     f"[{_pct(t['ci95'][0], scale)}, {_pct(t['ci95'][1], scale)}] | "
                     f"{_pct(v['mean'], scale)} ± {_pct(v['std'], scale)} | {params} | {search} | "
                     f"{r['train_seconds']:.0f} | {r['init']} |")
    lines += ["", "## Verdicts (paired t-test over seeds, two-sided, 5 %)", ""]
    lines += [f"- **{v['verdict']}**: {v['sentence']}" for v in result["verdicts"]]
    lines += ["", f"The best baseline is the one with the highest mean test {metric} (`{result['best_baseline']}`). "
              "The tests are over training seeds on this one data split; they do not cover how the split itself "
              "was drawn, so a difference of a few test examples holds for this split only.",
              "", f"![every seed's score per row]({FIGURE})", "", "## Found architectures", ""]
    for r in rows:
        if r["kind"] != "baseline":
            arch = "; ".join(line.strip() for line in str(r["arch"]).splitlines() if line.strip())
            lines.append(f"- {r['name']}: `{arch}`")
    lines += ["", "Each row is a run directory of this folder (`attnas report <folder>/<row>` draws it).", ""]
    return "\n".join(lines)


def plot_seeds(result: dict, path: Path) -> None:
    """Every seed's test score per row (lines join the same seed across rows), written atomically."""
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(rows) + 1.5), 3.8))
    xs = range(len(rows))
    n = result["seeds"]
    for k in range(n):
        ax.plot(list(xs), [r["test_per_seed"][k] for r in rows], color="0.8", lw=0.7, zorder=1)
    for x, r in zip(xs, rows):
        color = {"search": "tab:red", "random": "tab:orange"}.get(r["kind"], "tab:blue")
        ax.scatter([x] * n, r["test_per_seed"], color=color, s=18, zorder=2)
        ax.hlines(r["test"]["mean"], x - 0.25, x + 0.25, color=color, lw=2, zorder=3)
    ax.set_xticks(list(xs), [r["name"] for r in rows], rotation=30 if len(rows) > 5 else 0, ha="right" if len(rows) > 5 else "center")
    ax.set_ylabel(f"test {result['metric']}")
    ax.set_title(f"{result['recipe']}: {n} seeds per row")
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
