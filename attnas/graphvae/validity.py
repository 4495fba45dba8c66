"""Validity of decoded DAGs (D-VAE's ``is_valid_DAG`` and ``is_valid_ENAS``).

D-VAE (Zhang et al. 2019, Sec. 4.1 and public ``util.py``): a decoded graph is a valid
computation graph when it is acyclic, has exactly one input-type and one output-type
vertex, every vertex but the input has a predecessor and every vertex but the output has
a successor. A valid ENAS architecture additionally has the chain edges ``i -> i+1`` for
every vertex but the output, and the output vertex has exactly one predecessor (the last
layer). D-VAE's prior-validity metric (Table 1) uses exactly this test; when decoding
points for Bayesian optimisation it also requires the full node count (``n_nodes``).

Decoded graphs are acyclic by construction (edges only go from lower to higher
indices); acyclicity is still checked, for batches built elsewhere.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnas.graphvae.dag_batch import END_TYPE, START_TYPE, DagBatch


def is_valid_dag(batch: DagBatch) -> Tensor:
    """D-VAE's ``is_valid_DAG`` for every graph (``(G,)`` bool)."""
    mask = batch.node_mask()
    adj = batch.adj & mask.unsqueeze(1) & mask.unsqueeze(2)
    types = batch.types
    indeg = adj.sum(1)
    outdeg = adj.sum(2)
    n_start = ((types == START_TYPE) & mask).sum(1)
    n_end = ((types == END_TYPE) & mask).sum(1)
    no_pred = (indeg == 0) & (types != START_TYPE) & mask
    no_succ = (outdeg == 0) & (types != END_TYPE) & mask
    acyclic = ~torch.tril(adj).flatten(1).any(1)  # edges only from lower to higher index
    return (n_start == 1) & (n_end == 1) & ~no_pred.any(1) & ~no_succ.any(1) & acyclic


def is_valid_enas(batch: DagBatch, n_nodes: int | None = None) -> Tensor:
    """D-VAE's ``is_valid_ENAS`` for every graph (``(G,)`` bool).

    Args:
        batch: The graphs.
        n_nodes: Also require exactly this many vertices (D-VAE's BO decoding checks the
            dataset's 8); None checks no count (D-VAE's prior-validity metric).
    """
    ok = is_valid_dag(batch)
    g, n = batch.types.shape
    if n > 1:
        chain = batch.adj[:, torch.arange(n - 1), torch.arange(1, n)]  # (G, n-1): edge i -> i+1
        needed = torch.arange(n - 1, device=chain.device).unsqueeze(0) < (batch.n_nodes - 1).unsqueeze(1)
        ok = ok & ~(needed & ~chain).any(1)
    last = (batch.n_nodes - 1).clamp(min=0)
    indeg_out = batch.adj[torch.arange(g), :, last].sum(1)
    ok = ok & (indeg_out == 1)
    if n_nodes is not None:
        ok = ok & (batch.n_nodes == n_nodes)
    return ok
