"""What graph operations need besides node features: the edges, and caches per forward."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch_geometric.utils import add_remaining_self_loops


@dataclass
class GraphContext:
    """Edges of the graph a batch holds, shared by every operation of one forward pass.

    Attributes:
        edge_index: [2, E] edges (source row 0, target row 1), as torch_geometric.
        num_nodes: Number of nodes.
        cache: Per-forward memo (e.g. edges with self-loops), filled on first use.
    """

    edge_index: torch.Tensor
    num_nodes: int
    cache: dict = field(default_factory=dict)

    @property
    def edge_index_with_self_loops(self) -> torch.Tensor:
        """``edge_index`` with one self-loop per node (so no node attends to nothing)."""
        if "self_loops" not in self.cache:
            self.cache["self_loops"] = add_remaining_self_loops(self.edge_index, num_nodes=self.num_nodes)[0]
        return self.cache["self_loops"]
