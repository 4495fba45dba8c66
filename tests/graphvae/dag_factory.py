"""Random valid DAG batches for the graph-VAE tests (not a test module)."""

from __future__ import annotations

import numpy as np

from attnas.graphvae.dag_batch import DagBatch


def random_dags(count: int, max_nodes: int, num_types: int, seed: int = 0, min_nodes: int = 3, p: float = 0.4) -> DagBatch:
    """``count`` valid DAGs with ``min_nodes..max_nodes`` nodes.

    The input is first and the output last; every vertex but the input has a predecessor
    and every vertex but the output a successor; the output's predecessors are exactly
    the vertices without another successor (how D-VAE's decoder wires the output).
    """
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(count):
        n = int(rng.integers(min_nodes, max_nodes + 1))
        adj = np.zeros((n, n), dtype=np.uint8)
        for v in range(1, n - 1):
            preds = rng.random(v) < p
            if not preds.any():
                preds[rng.integers(0, v)] = True
            adj[:v, v] = preds
        for u in range(n - 1):
            if not adj[u].any():
                adj[u, n - 1] = 1
        types = [0] + rng.integers(2, num_types, size=n - 2).tolist() + [1]
        graphs.append((adj, types))
    return DagBatch.from_graphs(graphs, max_nodes=max_nodes)
