"""The GCN encoder: simultaneous graph convolutions over a DAG.

The GCN baseline of D-VAE (Zhang et al. 2019, Sec. 4, "GCN") and Chatzianastasis et al. (2021, Sec. 4,
GCN / GCN-EMB): every vertex is updated at the same time in each of ``L`` layers
(Kipf & Welling 2017, generalised to directed graphs as in D-VAE)::

    h_v^{l+1} = ReLU(W_l (h_v^l / (d_in(v) + 1)
                          + sum_{u -> v} h_u^l / sqrt((d_out(u) + 1)(d_in(v) + 1))) + b_l)

with ``h^0 = x`` (one-hot operations or operation embeddings, Chatzianastasis et al., 2021, Eq. 3a-3b).
With ``undirected=True`` edge directions are ignored and both degrees are total degrees.
The graph state is the sum of the states of all vertices except the input and output
vertices; two linear layers give the posterior mean and log-variance.

D-VAE's reference code updates vertices in place in index order, so from the second
layer on a vertex reads its predecessors' *current-layer* states; here each layer reads
only the previous layer's states, the simultaneous convolution that both papers describe.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnas.core.errors import ConfigError


class GCNEncoder(nn.Module):
    """Directed GCN encoder of D-VAE's GCN baseline (Chatzianastasis et al., 2021, Sec. 4).

    Args:
        x_dim: Size of the operation features.
        hidden: Hidden size of every layer (D-VAE: 501).
        latent: Latent size.
        layers: Number of graph convolutions (D-VAE: 3).
        undirected: Ignore edge directions (D-VAE's ``bidirectional`` flag for GCN).

    Shapes:
        - **x**: ``(B, N, x_dim)``
        - **adj**: ``(B, N, N)`` bool, ``adj[b, u, v]`` = edge ``u -> v``
        - **n_nodes**: ``(B,)`` int64
        - **output**: ``(mu, logvar)``, each ``(B, latent)``
    """

    def __init__(self, x_dim: int, hidden: int, latent: int, layers: int = 3, undirected: bool = False):
        super().__init__()
        if layers < 1:
            raise ConfigError(f"the GCN encoder needs at least one layer, got {layers}")
        self.undirected = undirected
        self.convs = nn.ModuleList([nn.Linear(x_dim if i == 0 else hidden, hidden) for i in range(layers)])
        self.fc_mu = nn.Linear(hidden, latent)
        self.fc_logvar = nn.Linear(hidden, latent)

    def propagation(self, adj: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """The normalised propagation matrix and self-loop weights.

        Returns:
            ``(P, s)`` with ``P[b, v, u]`` the weight of ``u``'s state in ``v``'s update and
            ``s[b, v]`` the weight of ``v``'s own state.

        Shapes:
            - **P**: ``(B, N, N)``
            - **s**: ``(B, N)``
        """
        a = adj.to(dtype)
        if self.undirected:
            a = a + a.transpose(1, 2)
            deg_src = deg_dst = a.sum(1)
        else:
            deg_dst = a.sum(1)  # in-degree of each target v
            deg_src = a.sum(2)  # out-degree of each source u
        norm = torch.rsqrt((deg_src + 1).unsqueeze(2) * (deg_dst + 1).unsqueeze(1))  # [b, u, v]
        p = (a * norm).transpose(1, 2)
        return p, 1.0 / (deg_dst + 1)

    def forward(self, x: Tensor, adj: Tensor, n_nodes: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and log-variance of every graph."""
        p, s = self.propagation(adj, x.dtype)
        h = x
        for conv in self.convs:
            h = torch.relu(conv(torch.bmm(p, h) + s.unsqueeze(-1) * h))
        n = x.shape[1]
        ar = torch.arange(n, device=x.device).unsqueeze(0)
        inner = (ar > 0) & (ar < (n_nodes - 1).unsqueeze(1))  # all but the input and output vertex
        hg = (h * inner.unsqueeze(-1).to(h.dtype)).sum(1)
        return self.fc_mu(hg), self.fc_logvar(hg)
