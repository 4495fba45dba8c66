"""What graph operations need besides node features: the edges, and per-graph caches.

Normalised adjacency matrices do not change while a graph does, so they are computed
once per graph (the cache lives on the batch, which a transductive task reuses every
step) as sparse CSR matrices ``M`` with ``M[target, source] = weight``; an operation then
propagates with one sparse-dense product ``M @ h``. While ``torch.export`` traces a model
(which holds no sparse tensors) ``M`` is kept as its edges instead (:class:`EdgeListMatrix`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_remaining_self_loops, get_laplacian

from attnas.ops.overrides import overridable


class EdgeListMatrix:
    """``M`` with ``M[dst, src] = weight`` kept as its edge list; ``M @ x`` is a scatter-add
    (:math:`(Mx)_i = \\sum_{(j, i) \\in E} w_{ji} x_j`, duplicate edges summed as in CSR).

    The form :func:`to_csr` gives while ``torch.export`` traces a model: exported programs
    hold no sparse tensors, and the products agree with the CSR ones up to summation order.
    """

    def __init__(self, edge_index: torch.Tensor, weight: torch.Tensor, num_nodes: int):
        self.src, self.dst, self.weight, self.num_nodes = edge_index[0], edge_index[1], weight, num_nodes

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        messages = x[self.src] * self.weight.to(x.dtype).unsqueeze(-1)
        return x.new_zeros((self.num_nodes, x.size(-1))).index_add_(0, self.dst, messages)


def to_csr(edge_index: torch.Tensor, weight: torch.Tensor, num_nodes: int) -> torch.Tensor | EdgeListMatrix:
    """Sparse CSR ``M`` with ``M[dst, src] = weight`` (duplicate edges summed); an
    :class:`EdgeListMatrix` while ``torch.export`` traces."""
    if torch.compiler.is_exporting():
        return EdgeListMatrix(edge_index, weight, num_nodes)
    idx = torch.stack([edge_index[1], edge_index[0]])
    coo = torch.sparse_coo_tensor(idx, weight, (num_nodes, num_nodes), check_invariants=False).coalesce()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return coo.to_sparse_csr()


@dataclass
class GraphContext:
    """Edges of the graph a batch holds, shared by every operation of a forward pass.

    Attributes:
        edge_index: [2, E] edges (source row 0, target row 1), as torch_geometric.
        num_nodes: Number of nodes.
        cache: Memo of derived structures; pass the batch's own dict so it outlives one forward.
    """

    edge_index: torch.Tensor
    num_nodes: int
    cache: dict = field(default_factory=dict)

    @overridable("graph_propagate")
    def propagate(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """``M @ x`` for the cached matrix ``M`` of property ``name`` (e.g. ``"gcn_adj"``).

        The optional kernel ``sparse_transpose`` (:mod:`attnas.kernels`) keeps ``M``'s
        transpose for the backward pass, converted to CSR once per graph, not once per step.
        """
        return getattr(self, name) @ x

    def memo(self, key: str, make):
        """``cache[key]``, made by ``make()`` (without gradients) the first time."""
        if key not in self.cache:
            with torch.no_grad():
                self.cache[key] = make()
        return self.cache[key]

    @property
    def edge_index_with_self_loops(self) -> torch.Tensor:
        """``edge_index`` plus a self-loop for every node that lacks one."""
        return self.memo("self_loops", lambda: add_remaining_self_loops(self.edge_index, num_nodes=self.num_nodes)[0])

    @property
    def gcn_adj(self) -> torch.Tensor:
        """D^-1/2 (A + I) D^-1/2 as CSR (Kipf & Welling's propagation matrix)."""
        return self._symmetric("gcn_adj", self_loops=True)

    def _symmetric(self, key: str, self_loops: bool) -> torch.Tensor:
        """``D^-1/2 A D^-1/2`` as CSR (with ``A + I`` for ``A`` when ``self_loops``), cached as ``key``."""
        def make():
            ei, w = gcn_norm(self.edge_index, None, self.num_nodes, add_self_loops=self_loops)
            return to_csr(ei, w, self.num_nodes)
        return self.memo(key, make)

    @property
    def sum_adj(self) -> torch.Tensor:
        """A + I (binary, every node its own neighbour) as CSR: plain sum aggregation."""
        def make():
            ei = self.edge_index_with_self_loops
            return to_csr(ei, torch.ones(ei.size(1), device=ei.device), self.num_nodes)
        return self.memo("sum_adj", make)

    @property
    def cheb_laplacian(self) -> torch.Tensor:
        """ChebConv's scaled Laplacian 2L/lambda_max - I (symmetric normalisation) as CSR.

        Built exactly as ``ChebConv.__norm__`` does with its default ``lambda_max``
        (twice the largest Laplacian weight), so the two agree on directed graphs too.
        """
        def make():
            ei, w = get_laplacian(self.edge_index, None, "sym", num_nodes=self.num_nodes)
            w = 2.0 * w / (2.0 * w.max())
            w = torch.where(ei[0] == ei[1], w - 1, w)
            return to_csr(ei, w, self.num_nodes)
        return self.memo("cheb_laplacian", make)

    @property
    def sym_adj(self) -> torch.Tensor:
        """D^-1/2 A D^-1/2 as CSR (no self-loops, in-degree normalisation): ARMA's propagation."""
        return self._symmetric("sym_adj", self_loops=False)

    @property
    def mean_adj(self) -> torch.Tensor:
        """D^-1 A as CSR (no self-loops): the mean over each node's in-neighbours (GraphSAGE)."""
        def make():
            ei = self.edge_index
            deg = torch.zeros(self.num_nodes, device=ei.device).index_add_(
                0, ei[1], torch.ones(ei.size(1), device=ei.device))
            return to_csr(ei, 1.0 / deg[ei[1]], self.num_nodes)
        return self.memo("mean_adj", make)


class SparseFeatures:
    """Node features as a sparse CSR matrix, with its transpose for the weight gradient.

    ``x @ W^T`` of a sparse ``x`` needs ``x^T @ grad`` in the backward pass; torch builds
    ``x^T`` in CSR form (a sort of the non-zeros) on every call. The layer-1 operations of a
    raw-feature AutoAttend network all multiply the same ``x``, whose non-zero pattern never
    changes, so the transpose's pattern is computed once per graph (:meth:`from_rows`) and
    only its values are gathered per step; the optional kernel ``sparse_transpose``
    (:mod:`attnas.kernels`) uses it in :func:`project`'s backward pass.

    Attributes:
        rows: [N, F] sparse CSR.
        rows_t: [F, N] sparse CSR, the transpose of ``rows``.
    """

    def __init__(self, rows: torch.Tensor, rows_t: torch.Tensor):
        self.rows, self.rows_t = rows, rows_t

    @classmethod
    def from_rows(cls, cols: torch.Tensor, offsets: torch.Tensor, values: torch.Tensor, num_cols: int,
                  cache: dict | None = None) -> SparseFeatures:
        """Features given as CSR parts (``offsets``: start of each row); ``cache`` keeps the transpose's pattern."""
        cache = {} if cache is None else cache
        n = offsets.numel()
        crow = torch.cat([offsets, offsets.new_tensor([cols.numel()])])
        if "sparse_x_t" not in cache:
            row_of = torch.repeat_interleave(torch.arange(n, device=cols.device), crow.diff())
            order = torch.argsort(cols * n + row_of, stable=True)
            crow_t = torch.zeros(num_cols + 1, dtype=crow.dtype, device=cols.device)
            crow_t[1:] = torch.bincount(cols, minlength=num_cols).cumsum(0)
            cache["sparse_x_t"] = (crow_t, row_of[order], order)
        crow_t, col_t, order = cache["sparse_x_t"]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            rows = torch.sparse_csr_tensor(crow, cols, values, (n, num_cols), check_invariants=False)
            rows_t = torch.sparse_csr_tensor(crow_t, col_t, values[order], (num_cols, n), check_invariants=False)
        return cls(rows, rows_t)

    @property
    def shape(self) -> torch.Size:
        return self.rows.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.rows.dtype

    @property
    def device(self) -> torch.device:
        return self.rows.device

    def size(self, dim: int | None = None):
        """As :meth:`torch.Tensor.size`."""
        return self.rows.size() if dim is None else self.rows.size(dim)


@overridable("sparse_project")
def project(x: torch.Tensor | SparseFeatures, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x W^T + b`` for dense node features, a sparse CSR matrix or :class:`SparseFeatures`.

    Layer-1 operations of AutoAttend read the raw node features (Cora: 1,433 bag-of-words
    columns, 1.3 % non-zero); every graph operation starts with a linear map of its
    input, so they all go through here and a sparse input costs a sparse-dense product.

    Shapes:
        - x: [N, F] dense or sparse
        - weight: [D, F]
        - output: [N, D]
    """
    if isinstance(x, SparseFeatures):
        x = x.rows
    if x.layout == torch.sparse_csr:
        out = x @ weight.t()
    else:
        return torch.nn.functional.linear(x, weight, bias)
    return out if bias is None else out + bias
