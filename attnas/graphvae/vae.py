"""The graph VAE: an encoder, the shared DAG decoder, and D-VAE's ELBO loss.

Chatzianastasis et al., 2021, Sec. 3.2, Eq. 1 (the evidence lower bound) with D-VAE's training details
(Zhang et al. 2019, public code): the loss of a batch is the teacher-forced negative
log-likelihood of the true graphs plus ``beta * KL(q(z|G) || N(0, I))``, summed over the
batch, with ``beta = 0.005``; during training ``z = mu + eps_scale * eps * sigma`` with
``eps_scale = 0.01``, and at evaluation ``z = mu``.

The four models of Chatzianastasis et al.'s (2021) tables are :data:`PAPER_MODELS`: D-VAE and DVAE-EMB use
the bidirectional asynchronous encoder, GCN and GCN-EMB the directed GCN encoder; the
``-EMB`` variants replace one-hot operations with learned 3-dimensional embeddings.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, replace
from typing import Literal

import torch
from torch import Tensor, nn

from attnas.config import CheckedConfig, NonNegativeFloat, PositiveInt
from attnas.core.errors import ConfigError, DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.decoder import DagDecoder
from attnas.graphvae.dvae_encoder import DVAEEncoder
from attnas.graphvae.gcn_encoder import GCNEncoder
from attnas.graphvae.op_encoding import OperationEncoding


@dataclass(frozen=True)
class GraphVAEConfig(CheckedConfig):
    """Options of a graph VAE (defaults: D-VAE's ENAS settings).

    Attributes:
        encoder: ``"dvae"`` (asynchronous GRU message passing) or ``"gcn"``.
        operations: ``"onehot"`` or ``"embedding"`` (Chatzianastasis et al.'s operation embeddings).
        op_dim: Size ``d_op`` of an operation embedding (paper: 3).
        hidden: Hidden state size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        bidirectional: D-VAE encoder: add the reverse pass; GCN: ignore edge directions.
        gcn_layers: Number of GCN layers (D-VAE: 3).
        message_input: Vertex descriptor in messages: ``"vertex_id"`` (public code) or
            ``"operation"`` (Eq. 6 as printed in Chatzianastasis et al., 2021).
        beta: Weight of the KL term (D-VAE: 0.005).
        eps_scale: Scale of the reparameterisation noise during training (D-VAE: 0.01).
    """

    encoder: Literal["dvae", "gcn"] = "dvae"
    operations: Literal["onehot", "embedding"] = "onehot"
    op_dim: PositiveInt = 3
    hidden: PositiveInt = 501
    latent: PositiveInt = 56
    bidirectional: bool = True
    gcn_layers: PositiveInt = 3
    message_input: Literal["vertex_id", "operation"] = "vertex_id"
    beta: NonNegativeFloat = 0.005
    eps_scale: NonNegativeFloat = 0.01


#: The models of Chatzianastasis et al.'s (2021) Tables 1-2, with D-VAE's ENAS sizes.
PAPER_MODELS: dict[str, GraphVAEConfig] = {
    "D-VAE": GraphVAEConfig(encoder="dvae", operations="onehot", bidirectional=True),
    "DVAE-EMB": GraphVAEConfig(encoder="dvae", operations="embedding", bidirectional=True),
    "GCN": GraphVAEConfig(encoder="gcn", operations="onehot", bidirectional=False),
    "GCN-EMB": GraphVAEConfig(encoder="gcn", operations="embedding", bidirectional=False),
}


def precision_context(precision: str, device: torch.device | str = "cpu") -> contextlib.AbstractContextManager:
    """The autocast context of a training precision: none for ``"fp32"``, bf16 autocast
    for ``"bf16"`` (matrix products in bf16; :meth:`GraphVAE.loss` keeps the latent
    statistics and the log-likelihood terms in the weights' dtype)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    raise ConfigError(f"precision: '{precision}' is not one of fp32, bf16")


def paper_model(name: str, **overrides) -> GraphVAEConfig:
    """The config of one of Chatzianastasis et al.'s (2021) models, with optional field overrides."""
    if name not in PAPER_MODELS:
        from attnas.core.errors import unknown_name

        raise ConfigError(unknown_name("graph VAE model", name, PAPER_MODELS))
    return replace(PAPER_MODELS[name], **overrides)


class GraphVAE(nn.Module):
    """A variational autoencoder for DAGs (Chatzianastasis et al., 2021, Sec. 3; D-VAE).

    Args:
        config: The model options.
        num_types: Number of vertex types of the data (input and output included).
        max_nodes: Largest node count of the data (and of decoded graphs).
    """

    def __init__(self, config: GraphVAEConfig, num_types: int, max_nodes: int):
        super().__init__()
        if max_nodes < 2:
            raise ConfigError(f"a DAG needs at least an input and an output vertex; max_nodes={max_nodes}")
        self.config = config
        self.num_types = num_types
        self.max_nodes = max_nodes
        self.ops = OperationEncoding(num_types, config.operations, config.op_dim)
        x_dim = self.ops.out_dim
        if config.encoder == "dvae":
            self.encoder: nn.Module = DVAEEncoder(
                x_dim, config.hidden, config.latent, max_nodes, config.bidirectional, config.message_input
            )
        else:
            self.encoder = GCNEncoder(x_dim, config.hidden, config.latent, config.gcn_layers, config.bidirectional)
        self.decoder = DagDecoder(num_types, max_nodes, config.hidden, config.latent, x_dim, config.message_input)

    def arguments(self) -> dict:
        """What is needed to rebuild this model before loading its ``state_dict``."""
        return {"config": asdict(self.config), "num_types": self.num_types, "max_nodes": self.max_nodes}

    @staticmethod
    def from_arguments(args: dict) -> GraphVAE:
        """Rebuild a model from :meth:`arguments`."""
        return GraphVAE(GraphVAEConfig(**args["config"]), args["num_types"], args["max_nodes"])

    def _check(self, batch: DagBatch) -> None:
        if batch.max_nodes > self.max_nodes:
            raise DataError(f"graphs have up to {batch.max_nodes} nodes but the model handles at most {self.max_nodes}")
        if len(batch) and int(batch.types.max()) >= self.num_types:
            raise DataError(f"vertex type {int(batch.types.max())} is outside the model's {self.num_types} types")

    def encode(self, batch: DagBatch) -> tuple[Tensor, Tensor]:
        """Posterior mean and log-variance (``(B, latent)`` each)."""
        self._check(batch)
        return self.encoder(self.ops(batch.types), batch.adj, batch.n_nodes)

    def reparameterize(self, mu: Tensor, logvar: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """``mu + eps_scale * eps * exp(logvar / 2)`` when training, ``mu`` otherwise (D-VAE)."""
        if not self.training:
            return mu
        eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
        return mu + self.config.eps_scale * eps * torch.exp(0.5 * logvar)

    def loss(self, batch: DagBatch, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """D-VAE's loss of a batch, summed over its graphs.

        Returns:
            ``{"loss": recon + beta * kld, "recon": negative log-likelihood, "kld": KL}``.
        """
        dtype = self.decoder.fc_h0.weight.dtype  # under bf16 autocast the linear outputs are bf16
        mu, logvar = (t.to(dtype) for t in self.encode(batch))
        z = self.reparameterize(mu, logvar, generator)
        type_ll, edge_ll = self.decoder.log_likelihood(z, self.ops, batch)
        recon = -(type_ll + edge_ll).sum()
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return {"loss": recon + self.config.beta * kld, "recon": recon, "kld": kld}

    @torch.no_grad()
    def decode(self, z: Tensor, stochastic: bool = True, generator: torch.Generator | None = None) -> DagBatch:
        """Decode latent codes into DAGs (stochastic by default, as D-VAE)."""
        return self.decoder.sample(z, self.ops, stochastic=stochastic, generator=generator)

    @torch.no_grad()
    def latent_means(self, batch: DagBatch, batch_size: int = 1024) -> Tensor:
        """Posterior means of many graphs (``(G, latent)``), in evaluation mode."""
        was = self.training
        self.eval()
        try:
            out = [self.encode(batch.index(slice(i, i + batch_size)))[0] for i in range(0, len(batch), batch_size)]
        finally:
            self.train(was)
        return torch.cat(out) if out else torch.zeros(0, self.config.latent)

    def operation_embeddings(self) -> Tensor | None:
        """The learned ``(num_types, d_op)`` embedding table, or None for one-hot."""
        return None if self.ops.embedding is None else self.ops.embedding.weight.detach().clone()
