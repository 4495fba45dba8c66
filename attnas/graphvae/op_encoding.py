"""How a vertex's operation is shown to the graph VAE: one-hot or a learned embedding.

Chatzianastasis et al., 2021 ("Operation Embeddings for Neural Architecture
Search", Sec. 3.3) replaces the fixed one-hot operation matrix ``X`` of D-VAE/GCN with
an operation embedding ``O: K -> R^{d_op}`` (Eqs. 3a-3b, 8-11): a table of ``|K|``
learnable vectors of size ``d_op = 3``, initialised from ``N(0, 1)`` and trained with the
other weights by gradient descent. One module serves the encoder and the decoder, so a
model has one embedding table (as in the authors' public code, where the decoder's GRU
also reads the embedding).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from attnas.core.errors import ConfigError


class OperationEncoding(nn.Module):
    """One-hot vectors or learnable operation embeddings ``O(x)`` (Chatzianastasis et al., 2021, Sec. 3.3).

    Args:
        num_types: Number of vertex types ``|K|`` (operations plus input and output).
        mode: ``"onehot"`` (D-VAE, GCN) or ``"embedding"`` (DVAE-EMB, GCN-EMB).
        dim: Embedding size ``d_op`` (paper: 3); ignored for one-hot.

    Shapes:
        - **input**: ``(*)`` int64 vertex types
        - **output**: ``(*, out_dim)`` float, ``out_dim = num_types`` (one-hot) or ``dim``
    """

    def __init__(self, num_types: int, mode: Literal["onehot", "embedding"] = "onehot", dim: int = 3):
        super().__init__()
        if mode not in ("onehot", "embedding"):
            raise ConfigError(f"unknown operation encoding '{mode}'; valid: onehot, embedding")
        if num_types < 2:
            raise ConfigError(f"an operation encoding needs at least 2 vertex types, got {num_types}")
        self.num_types = num_types
        self.mode = mode
        if mode == "embedding":
            if dim < 1:
                raise ConfigError(f"operation embedding size must be >= 1, got {dim}")
            # nn.Embedding initialises its table from N(0, 1), the paper's initialisation.
            self.embedding: nn.Embedding | None = nn.Embedding(num_types, dim)
            self.out_dim = dim
        else:
            self.embedding = None
            self.register_buffer("eye", torch.eye(num_types), persistent=False)
            self.out_dim = num_types

    def forward(self, types: Tensor) -> Tensor:
        """Encode vertex types."""
        if self.embedding is not None:
            return self.embedding(types)
        return self.eye[types]

    def table(self) -> Tensor:
        """The ``(num_types, out_dim)`` matrix of every type's vector."""
        return self.forward(torch.arange(self.num_types, device=self._device()))

    def _device(self) -> torch.device:
        if self.embedding is not None:
            return self.embedding.weight.device
        return self.eye.device

    def extra_repr(self) -> str:
        return f"num_types={self.num_types}, mode={self.mode}, out_dim={self.out_dim}"
