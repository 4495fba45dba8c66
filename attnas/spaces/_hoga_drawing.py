"""Draw a HOGA cell as AutoLA's Figure 3 does: groups and nodes, one labelled edge per operation.

Layout: the input groups ``F_0 .. F_{K-1}`` in the left column, the nodes ``U_0 .. U_{K-1}`` in
the middle column (top to bottom), the output ``phi([U_0; ...; U_bar])`` on the right. Edge
``k-k`` runs from ``F_k`` to ``U_k``; edge ``j-k`` (``j < k``) from ``U_j`` to ``U_k`` (curved so
parallel edges stay apart). Each edge is labelled with its operation and coloured by its
family; ``zero`` edges (which remove the connection) are drawn dotted and grey.

    python -m attnas.spaces._hoga_drawing RUN_DIR/arch.json cell.png [--title TEXT] [--weights alpha.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

FAMILY_COLOURS = {
    "se": "#1f77b4", "channel_v2": "#17becf",          # channel attention
    "spatial_d1": "#2ca02c", "spatial_d2": "#98df8a",  # spatial attention
    "norm_d1": "#d62728", "norm_d2": "#ff9896",        # normalization attention
    "cbam": "#9467bd",                                 # CBAM
    "identity": "#7f7f7f", "zero": "#c7c7c7",
}
LABELS = {
    "se": "A_c (SE)", "channel_v2": "A_c2", "spatial_d1": "A_s d1", "spatial_d2": "A_s d2",
    "norm_d1": "A_n d1", "norm_d2": "A_n d2", "cbam": "A_b (CBAM)", "identity": "A_1 skip", "zero": "zero",
}


def _save(fig, ax, title: str, title_size: int, path: str | Path) -> Path:
    """Title ``ax`` (when ``title``), write ``fig`` to the PNG ``path`` at 150 dpi and close it."""
    import matplotlib.pyplot as plt

    if title:
        ax.set_title(title, fontsize=title_size)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def draw_hoga_cell(edges: dict[str, str], groups: int, path: str | Path, title: str = "") -> Path:
    """Draw the cell ``edges`` (``{"j-k": op}``) with ``groups`` groups to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    K = groups
    fig_h = 1.3 * K + 1.2
    fig, ax = plt.subplots(figsize=(9.3, fig_h))
    ys = {k: (K - 1 - k) * 1.3 for k in range(K)}
    fx, ux, ox = 0.0, 3.0, 7.4
    node_style = dict(ha="center", va="center", fontsize=11, zorder=5)
    for k in range(K):
        ax.text(fx, ys[k], f"$F_{k}$", bbox=dict(boxstyle="round,pad=0.35", fc="#f2f2f2", ec="#555555"), **node_style)
        ax.text(ux, ys[k], f"$U_{k}$", bbox=dict(boxstyle="circle,pad=0.3", fc="#fff7d6", ec="#555555"), **node_style)
    oy = (ys[0] + ys[K - 1]) / 2
    ax.text(ox, oy, "$\\varphi[U_0;\\ldots;\\bar U]$", bbox=dict(boxstyle="round,pad=0.4", fc="#e8f0fe", ec="#555555"),
            **node_style)
    for k in range(K):  # every node is concatenated into the output
        ax.add_patch(FancyArrowPatch((ux + 0.35, ys[k]), (ox - 0.95, oy), arrowstyle="-|>", mutation_scale=10,
                                     color="#cccccc", lw=0.8, linestyle="--", zorder=1))
    for k in range(K):
        for j in range(k + 1):
            op = edges[f"{j}-{k}"]
            colour = FAMILY_COLOURS.get(op, "black")
            style = ":" if op == "zero" else "-"
            if j == k:
                start, end, rad = (fx + 0.35, ys[k]), (ux - 0.35, ys[k]), 0.0
                label_xy = ((fx + ux) / 2, ys[k] + 0.13)
            else:
                start, end = (ux + 0.1, ys[j] - 0.25), (ux + 0.1, ys[k] + 0.25)
                rad = -0.3 - 0.25 * (k - j - 1)
                # apex of matplotlib's arc3 (a quadratic Bezier): midpoint + rad / 2 * (dy, -dx)
                dy = end[1] - start[1]
                label_xy = (start[0] + 0.5 * rad * dy, (start[1] + end[1]) / 2 - 0.1)
            ax.add_patch(FancyArrowPatch(start, end, connectionstyle=f"arc3,rad={rad}", arrowstyle="-|>",
                                         mutation_scale=12, color=colour, lw=1.8, linestyle=style, zorder=2))
            ax.text(*label_xy, f"{j}{k}: {LABELS.get(op, op)}", fontsize=8, color=colour, ha="center",
                    va="bottom" if j == k else "center",
                    zorder=6, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
    handles = [Line2D([], [], color=c, lw=2, linestyle=":" if o == "zero" else "-", label=LABELS[o])
               for o, c in FAMILY_COLOURS.items() if o in set(edges.values())]
    ax.legend(handles=handles, loc="upper right", fontsize=7, frameon=False, bbox_to_anchor=(1.02, 1.0))
    ax.set_xlim(-0.7, 8.6)
    ax.set_ylim(min(ys.values()) - 0.7, max(ys.values()) + 0.7)
    ax.axis("off")
    return _save(fig, ax, title, 10, path)


def draw_edge_weights(weights: dict[str, dict[str, float]], path: str | Path, title: str = "") -> Path:
    """Heat map of ``softmax(alpha)`` per edge (rows) and operation (columns), with the argmax marked.

    Args:
        weights: ``{"j-k": {op: probability}}``, as a derived architecture's ``meta["edge_weights"]``.
        path: The PNG to write.
        title: Figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    edges = list(weights)
    ops = list(next(iter(weights.values())))
    grid = np.array([[weights[e][o] for o in ops] for e in edges])
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(ops), 0.9 + 0.4 * len(edges)))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    for i, e in enumerate(edges):
        j = int(grid[i].argmax())
        ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", fontsize=7, color="white", fontweight="bold")
    ax.set_xticks(range(len(ops)), [LABELS.get(o, o) for o in ops], rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(edges)), [f"edge {e}" for e in edges], fontsize=8)
    fig.colorbar(im, ax=ax, label="softmax(alpha)")
    return _save(fig, ax, title, 9, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Draw the HOGA cell of an arch.json like AutoLA's Figure 3.")
    p.add_argument("arch", type=Path, help="an arch.json of the hoga space")
    p.add_argument("out", type=Path, help="the PNG to write")
    p.add_argument("--title", default="")
    p.add_argument("--weights", type=Path, default=None,
                   help="also draw softmax(alpha) of a derived cell (its meta.edge_weights) to this PNG")
    args = p.parse_args(argv)
    from attnas.core.arch import Arch

    arch = Arch.from_json(args.arch.read_text())
    if arch.space != "hoga":
        raise SystemExit(f"{args.arch}: an architecture of space '{arch.space}', not 'hoga'")
    print(draw_hoga_cell(arch.choices["edges"], arch.choices["groups"], args.out, args.title))
    if args.weights is not None:
        if "edge_weights" not in arch.meta:
            raise SystemExit(f"{args.arch}: no meta.edge_weights (not derived from a relaxed search)")
        print(draw_edge_weights(arch.meta["edge_weights"], args.weights, "softmax(alpha) at the end of the search"))


if __name__ == "__main__":
    main()
