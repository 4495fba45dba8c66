"""Graph properties against performance (Chatzianastasis et al., 2021, Sec. 4.4) and the latent t-SNE (Sec. 4.5).

Chatzianastasis et al., 2021, Sec. 4.4 and Appendix C: over the 19,020 ENAS architectures, the average path
length correlates positively with performance (Pearson's r = 0.32) and the clustering
coefficient negatively (r = -0.39).

- Average path length (Appendix C, Eq. 12): ``L_G = 1 / (n (n - 1)) * sum_{i != j} d(u_i, u_j)``
  over ordered pairs, with ``d`` the directed shortest-path length and ``d = 0`` when there
  is no path.
- Clustering coefficient: the global clustering coefficient (transitivity: the ratio of
  closed to connected triples, i.e. 3 x triangles / connected triples) of the graph with
  edge directions ignored, igraph's ``transitivity_undirected`` (networkx ``transitivity``).

Sec. 4.5: the latent means are projected to 2-D with t-SNE and coloured by accuracy.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
from torch import Tensor

from attnas.core.errors import DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.gp import rmse_pearson


def _digraph(adj: np.ndarray) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(len(adj)))
    g.add_edges_from(zip(*np.nonzero(adj)))
    return g


def average_path_length(adj: np.ndarray) -> float:
    """Chatzianastasis et al.'s (2021) Eq. 12 for one DAG (``adj[u, v] = 1`` for an edge ``u -> v``)."""
    adj = np.asarray(adj)
    n = len(adj)
    if n < 2:
        return 0.0
    total = sum(sum(d.values()) for _, d in nx.all_pairs_shortest_path_length(_digraph(adj)))
    return total / (n * (n - 1))


def clustering_coefficient(adj: np.ndarray) -> float:
    """Global clustering coefficient of one DAG with edge directions ignored."""
    return float(nx.transitivity(_digraph(np.asarray(adj)).to_undirected()))


def graph_properties(graphs: DagBatch) -> dict[str, np.ndarray]:
    """Average path length and clustering coefficient of every graph."""
    apl, cc = [], []
    for adj, _ in graphs.graphs():
        apl.append(average_path_length(adj))
        cc.append(clustering_coefficient(adj))
    return {"average_path_length": np.asarray(apl), "clustering_coefficient": np.asarray(cc)}


def property_correlations(graphs: DagBatch, y: Tensor | np.ndarray) -> dict[str, float]:
    """Pearson's r between each graph property and the performance ``y``.

    Returns:
        ``{"average_path_length_r", "clustering_coefficient_r"}`` and the property means.
    """
    y = np.asarray(y, dtype=np.float64)
    if len(y) != len(graphs):
        raise DataError(f"got {len(graphs)} graphs but {len(y)} performance values")
    props = graph_properties(graphs)
    out = {}
    for name, vals in props.items():
        out[f"{name}_r"] = rmse_pearson(vals, y)[1]
        out[f"{name}_mean"] = float(vals.mean())
    return out


def tsne_embedding(z: Tensor | np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    """2-D t-SNE of latent means (scikit-learn), ``(n, 2)``."""
    from sklearn.manifold import TSNE

    z = np.asarray(z, dtype=np.float64)
    if len(z) < 3:
        raise DataError(f"t-SNE needs at least 3 points, got {len(z)}")
    perplexity = min(perplexity, (len(z) - 1) / 3)
    return TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(z)


def plot_tsne(
    z: Tensor | np.ndarray, y: Tensor | np.ndarray, path: str | Path, title: str = "latent space", seed: int = 0
) -> Path:
    """Save the 2-D t-SNE of latent means coloured by accuracy (Chatzianastasis et al., 2021, Figs. 9-10).

    Args:
        z: Latent means ``(n, d)``.
        y: Accuracy of each point.
        path: Output image (PNG or PDF).
        title: Figure title.
        seed: t-SNE seed.

    Returns:
        The written path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    y = np.asarray(y, dtype=np.float64)
    xy = tsne_embedding(z, seed=seed)
    order = np.argsort(y)  # draw the best architectures on top
    fig, ax = plt.subplots(figsize=(6, 5))
    sc = ax.scatter(xy[order, 0], xy[order, 1], c=y[order], s=4, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="weight-sharing accuracy")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return path
