"""``graph-vae``: Chatzianastasis et al.'s (2021) experiment as a run (operation embeddings in graph VAEs).

Chatzianastasis et al., *Operation Embeddings for Neural Architecture Search* (2021), Sec. 4,
with D-VAE's protocol (Zhang et al., NeurIPS 2019). On a table of architectures with
measured scores (task ``architecture-performance``, e.g. ENAS's 19,020 DAGs) and the
space they belong to (e.g. ``enas``), resumable phase by phase:

1. ``vae``: train one of the paper's graph VAEs (D-VAE, DVAE-EMB, GCN, GCN-EMB) on the
   training DAGs (Sec. 3.2-3.3, Appendix B; ``T`` iterations carrying the operation
   embeddings over for DVAE-EMB); the weights go to ``vae.pt``.
2. ``evaluation``: Table 1 (reconstruction accuracy, prior validity, uniqueness; also
   the fraction of prior decodings that are architectures of the space, ``validity_space``),
   Table 2 (sparse-GP RMSE and Pearson's r on the test split, per repetition), the
   graph-property correlations of Sec. 4.4 and the t-SNE figure of Sec. 4.5 (``tsne.png``).
3. ``bo``: batch expected improvement in the latent space (Sec. 4.3) from the training
   latents; a decoded architecture is scored by table lookup when the table holds it
   (``source: dataset``); one outside the table is **unscored** (``source: unscored``, no
   value): it is counted (``bo_unscored`` in the metrics, ``unscored`` in each round's
   event) and never scored by a surrogate, since a GP fitted on the same latents would
   let the search optimise its own model. With ``bo_decode: in-table`` each
   proposal keeps its most common valid decoding that is in the table, so it is unscored
   only when none of its valid decodings is. Every proposal goes to ``bo.json`` and to the events.

The run's architecture is the best valid BO proposal (its source and score in
``arch.json``'s meta), or without BO the best training architecture. Nothing is trained
afterwards (``final_training = False``): the metrics above are the run's ``metrics.json``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from attnas.config import CheckedConfig, NonNegativeFloat, NonNegativeInt, PositiveInt, moved_into
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.graphvae.bo import INVALID, BOConfig, BOState, latent_bo
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.gp import SparseGPConfig, gp_prediction, summarize_predictions
from attnas.graphvae.metrics import Table1Config, table1
from attnas.graphvae.space_dags import SpaceDecoder
from attnas.graphvae.train import VAEOptimConfig, VAETrainConfig, TrainState, new_state
from attnas.graphvae.vae import GraphVAE, paper_model
from attnas.registry import register_strategy
from attnas.runs.checkpoint_files import save_checkpoint_file
from attnas.runs.resumable_phase import ResumablePhase, Slot
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.vae_training import train_vae_phase

#: Recipe names of Chatzianastasis et al.'s (2021) models.
MODELS = {"dvae": "D-VAE", "dvae-emb": "DVAE-EMB", "gcn": "GCN", "gcn-emb": "GCN-EMB"}
#: ``T`` of Sec. 3.3 / Appendix B: DVAE-EMB is trained for 4 iterations, the others once.
PAPER_ITERATIONS = {"dvae-emb": 4}


@dataclass(frozen=True)
class GraphVAEStrategyConfig(CheckedConfig):
    """Options of ``graph-vae`` (defaults: Chatzianastasis et al.'s protocol, D-VAE's sizes).

    The run's seed is added to every seed below (training, GP repetitions, BO).

    Attributes:
        model: ``dvae``, ``dvae-emb``, ``gcn`` or ``gcn-emb`` (Chatzianastasis et al.'s Tables 1-2).
        hidden: Hidden size (D-VAE: 501).
        latent: Latent size (D-VAE: 56).
        train: The VAE's optimisation (:class:`~attnas.graphvae.train.VAEOptimConfig`:
            ``epochs`` per iteration, ``batch_size``, Adam ``lr``, ``plateau_factor``,
            ``plateau_patience``, ``max_batches``, ``precision``; the paper's by default).
            Given flat (``strategy: {epochs: 300}``, the shape before this section), they
            are read as ``train.<key>``.
        iterations: ``T`` of Sec. 3.3 (null: the paper's, 4 for dvae-emb and 1 otherwise).
        beta: Weight of the KL term in the loss ``-E_q[log p(G|z)] + beta KL(q(z|G) || N(0, I))``
            (Chatzianastasis et al., 2021, Eq. 1 with D-VAE's weighting; D-VAE: 0.005).
        checkpoint_every: Epochs between training checkpoints.
        epoch_recon_graphs: After every epoch, the reconstruction accuracy of the first this
            many test graphs (each posterior mean decoded ``epoch_recon_decodes`` times,
            stochastically; and once greedily) goes into the epoch's event and the training
            history (0: not measured). A curve to watch, not Table 1.
        epoch_recon_decodes: Stochastic decodings per graph for ``epoch_recon_graphs``.
        table1: Sample sizes of Table 1 (D-VAE's protocol by default).
        gp: Sparse GP of Table 2 (500 inducing points).
        gp_repeats: Table 2 repetitions (paper: 10).
        properties: Compute the graph-property correlations of Sec. 4.4.
        tsne_points: Training latents in the t-SNE figure (0: no figure; null: all).
        bo: Latent BO of Sec. 4.3 (null: none).
        bo_decode: Which decoding of a BO point becomes its proposal: ``valid`` (the most
            common valid decoding, D-VAE's rule) or ``in-table`` (the most common valid
            decoding that the table holds when there is one, so that it can be scored by lookup).
    """

    model: Literal["dvae", "dvae-emb", "gcn", "gcn-emb"] = "dvae-emb"
    hidden: PositiveInt = 501
    latent: PositiveInt = 56
    train: VAEOptimConfig = field(default_factory=VAEOptimConfig)
    iterations: PositiveInt | None = None
    beta: NonNegativeFloat = 0.005
    checkpoint_every: PositiveInt = 10
    epoch_recon_graphs: NonNegativeInt = 0
    epoch_recon_decodes: PositiveInt = 10
    table1: Table1Config = field(default_factory=Table1Config)
    gp: SparseGPConfig = field(default_factory=SparseGPConfig)
    gp_repeats: PositiveInt = 10
    properties: bool = True
    tsne_points: NonNegativeInt | None = None
    bo: BOConfig | None = field(default_factory=BOConfig)
    bo_decode: Literal["valid", "in-table"] = "valid"

    moved_keys = moved_into(VAEOptimConfig, "train")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.train_settings(0)  # validates epochs, batch_size, lr, iterations, ...

    def train_settings(self, seed: int) -> VAETrainConfig:
        """The optimisation settings (``T`` resolved for the model)."""
        iterations = self.iterations if self.iterations is not None else PAPER_ITERATIONS.get(self.model, 1)
        return VAETrainConfig.of(self.train, iterations, seed)


@register_strategy("graph-vae")
class GraphVAEStrategy(Strategy):
    """Graph VAE on a table of architectures: Tables 1-2, graph properties, t-SNE, latent BO
    (Chatzianastasis et al., 2021)."""

    name = "graph-vae"
    Config = GraphVAEStrategyConfig
    requires = ("dag",)
    needs = ("gpytorch", "botorch")  # Table 2's sparse GP and the latent BO (attnas[bo])
    final_training = False

    @classmethod
    def check_task(cls, options: GraphVAEStrategyConfig, space: Any, task: Any) -> None:
        """Refuse a task that is not a table of scored architectures of ``space``."""
        train = getattr(task, "train", None)
        if not isinstance(train, DagDataset) or train.y is None:
            raise ConfigError(f"strategy '{cls.name}' needs a table of architectures with scores "
                              f"(task 'architecture-performance'), not task '{task.name}'")
        adj, types = train.graphs.index([0]).graphs()[0]
        try:
            space.from_dag(adj, train.labels(types))
        except ArchError as exc:
            raise ConfigError(f"the task's architectures are not architectures of space '{space.name}' "
                              f"with these options: {exc}") from None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.check_task(self.options, self.space, self.task)
        self.data = self.task.train
        self.decoder = SpaceDecoder(self.space, self.data.vocab)
        self.elapsed = 0.0

    @property
    def model_name(self) -> str:
        """The paper's name of the chosen model."""
        return MODELS[self.options.model]

    # ------------------------------------------------------------------ 1. training

    def train_vae(self) -> TrainState:
        """Train (or resume training) the VAE; checkpoints every ``checkpoint_every`` epochs."""
        cfg = self.options
        settings = cfg.train_settings(self.seed)

        def fresh() -> TrainState:
            config = paper_model(self.model_name, hidden=cfg.hidden, latent=cfg.latent, beta=cfg.beta)
            return new_state(config, self.data.num_types, self.data.max_nodes, settings)

        last = [time.time()]

        def on_epoch(st: TrainState, epoch: int) -> None:
            rec = st.history[-1]
            rec["seconds"] = round(time.time() - last[0], 2)
            if cfg.epoch_recon_graphs:
                rec.update(self.epoch_reconstruction(st.model, epoch))
            extra = {k: rec[k] for k in ("recon_accuracy", "recon_greedy") if k in rec}
            self.run.log({"phase": "vae", "epoch": epoch, "iteration": st.iteration + 1,
                          **{k: round(rec[k], 6) for k in ("loss", "recon", "kld")}, "lr": rec["lr"], **extra,
                          "seconds": rec["seconds"]})
            last[0] = time.time()

        state, self.elapsed = train_vae_phase(self.run, fresh, self.data, every=cfg.checkpoint_every,
                                              elapsed=self.elapsed, on_epoch=on_epoch,
                                              description=f"train {self.model_name}")
        return state

    def epoch_reconstruction(self, model: GraphVAE, epoch: int) -> dict:
        """Reconstruction accuracy of the first ``epoch_recon_graphs`` test graphs after an epoch.

        D-VAE's measure (Chatzianastasis et al., 2021, Table 1): the fraction of stochastic decodings of each
        posterior mean that equal the input graph; ``recon_greedy`` decodes each once with the
        most likely choices. Seeded by the run's seed and the epoch, and drawn from a generator
        of its own, so it does not change the training (a resumed run stays exact).
        """
        from attnas.graphvae.metrics import reconstruction_accuracy, same_dag

        cfg = self.options
        graphs = self.task.test.graphs.index(slice(0, cfg.epoch_recon_graphs))
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        acc = reconstruction_accuracy(model, graphs, 1, cfg.epoch_recon_decodes, generator=gen)
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                greedy = model.decode(model.latent_means(graphs), stochastic=False)
        finally:
            model.train(was)
        return {"recon_accuracy": round(acc, 6), "recon_greedy": round(float(same_dag(graphs, greedy).float().mean()), 6)}

    # ------------------------------------------------------------------ 2. evaluation

    def evaluate(self, model: GraphVAE) -> dict:
        """Table 1, Table 2, graph properties and t-SNE, resumable stage by stage."""
        cfg = self.options
        task = self.task
        ck = self.run.load_checkpoint("evaluation")
        st = ck["state"] if ck else {"metrics": {}, "stages": [], "rmse": [], "pearson_r": []}
        step = ck["step"] if ck else 0

        def save() -> None:
            nonlocal step
            step += 1
            self.run.save_checkpoint("evaluation", step, st)

        train, test = task.train, task.test
        z_train = model.latent_means(train.graphs)
        if "table1" not in st["stages"]:
            t = time.time()
            m = table1(model, train.graphs, test.graphs, cfg.table1, is_valid=task.is_valid, seed=self.seed,
                       extra_valid={"space": self.decoder.is_valid}, z_train=z_train)
            m["table1_seconds"] = round(time.time() - t, 2)
            st["metrics"].update(m)
            st["stages"].append("table1")
            self.run.log({"phase": "evaluation", "stage": "table1", **m})
            save()
        if len(st["rmse"]) < cfg.gp_repeats:
            z_test = model.latent_means(test.graphs)
            for i in range(len(st["rmse"]), cfg.gp_repeats):
                gp = replace(cfg.gp, seed=cfg.gp.seed + self.seed + i)
                rmse, r = gp_prediction(z_train, train.y, z_test, test.y, gp,
                                        description=f"Table 2 sparse GP {i + 1}/{cfg.gp_repeats}")
                st["rmse"].append(rmse)
                st["pearson_r"].append(r)
                self.run.log({"phase": "evaluation", "stage": "table2", "repeat": i + 1, "rmse": rmse, "pearson_r": r})
                save()
        st["metrics"].update(summarize_predictions(st["rmse"], st["pearson_r"], train.y, test.y))
        if cfg.properties and "properties" not in st["stages"]:
            from attnas.graphvae.analysis import property_correlations

            everything = task.everything
            m = property_correlations(everything.graphs, everything.y)
            st["metrics"].update(m)
            st["stages"].append("properties")
            self.run.log({"phase": "evaluation", "stage": "properties", **m})
            save()
        if cfg.tsne_points != 0 and "tsne" not in st["stages"]:
            from attnas.graphvae.analysis import plot_tsne

            k = len(z_train) if cfg.tsne_points is None else min(cfg.tsne_points, len(z_train))
            plot_tsne(z_train[:k], train.y[:k], self.run.file("tsne.png"),
                      title=f"{self.model_name} latent space ({k} training architectures)", seed=self.seed)
            st["stages"].append("tsne")
            self.run.log({"phase": "evaluation", "stage": "tsne", "points": k, "file": "tsne.png"})
            save()
        return dict(st["metrics"])

    # ------------------------------------------------------------------ 3. latent BO

    def _arch(self, graph, **meta) -> Arch | None:
        arch = self.decoder.arch(*graph)
        return None if arch is None else Arch(arch.space, arch.choices, meta=meta)

    def latent_bo(self, model: GraphVAE) -> tuple[Arch | None, dict]:
        """Batch EI in the latent space; scores by table lookup, proposals outside the table unscored."""
        from attnas.graphvae.evaluator import UNSCORED, TableEvaluator

        bo = replace(self.options.bo, seed=self.options.bo.seed + self.seed)
        task, metric = self.task, self.task.metric
        t = time.time()
        evaluator = TableEvaluator.from_dataset(task.everything)  # no fallback: outside the table is unscored
        prefer = evaluator.contains if self.options.bo_decode == "in-table" else None
        # the checkpoint is the BO state itself (``BOState.state_dict``), as it always was
        holder: list[BOState | None] = [None]

        def load(data: dict) -> None:
            holder[0] = BOState.from_state_dict(data)

        phase = ResumablePhase(self.run, "bo", {"bo": Slot(lambda: holder[0].state_dict(), load, merge=True)},
                               rng=False, elapsed_key=None, done_key=None)
        if not phase.resume():
            holder[0] = BOState.start(model.latent_means(task.train.graphs), task.train.y, bo.seed)
        state = holder[0]

        def on_iteration(it: int, props: list) -> None:
            first = len(state.proposals) - len(props)
            for k, p in enumerate(props):
                ev = {"phase": "bo", "stage": it + 1, "index": first + k, "source": p.source}
                if p.source != INVALID:
                    ev["arch"] = self.decoder.arch(*p.graph).choices
                if p.scored:
                    ev[metric] = p.value
                self.run.log(ev)
            self.run.log({"phase": "bo", "stage": it + 1, "round": it + 1, "proposals": len(props),
                          "scored": sum(p.scored for p in props),
                          "unscored": sum(p.source == UNSCORED for p in props),
                          "invalid": sum(p.source == INVALID for p in props)})
            phase.save(it + 1)

        result = latent_bo(model, state.x, state.y, evaluator, self.decoder.is_valid, bo, on_iteration, state,
                           prefer=prefer)
        self.run.write_json("bo.json", result.to_dict())
        props = result.proposals
        valid = [p for p in props if p.source != INVALID]
        measured = [p.value for p in props if p.scored]
        counts = result.counts()
        metrics = {
            f"bo_best_{metric}": None if result.best is None else result.best.value,
            "bo_best_source": None if result.best is None else result.best.source,
            f"bo_best_measured_{metric}": max(measured) if measured else None,
            f"bo_mean_{metric}": sum(measured) / len(measured) if measured else None,
            "bo_proposals": len(props),
            "bo_scored": counts["scored"],
            "bo_unscored": counts["unscored"],
            "bo_invalid": counts["invalid"],
            "bo_valid_fraction": len(valid) / max(len(props), 1),
            "bo_dataset_fraction": len(measured) / max(len(valid), 1),
            "bo_distinct_valid": len({p.key for p in valid}),
            "bo_distinct_scored": len({p.key for p in props if p.scored}),
            "bo_seconds": round(time.time() - t, 2),
        }
        best = None
        if result.best is not None:
            best = self._arch(result.best.graph, strategy=self.name, source=result.best.source,
                              **{metric: result.best.value})
        return best, metrics

    # ------------------------------------------------------------------ the run

    def search(self) -> SearchResult:
        state = self.train_vae()
        train_seconds = self.elapsed
        model = state.model
        model.eval()
        save_checkpoint_file(self.run.file("vae.pt"), {"model_args": model.arguments(), "model": model.state_dict(),
                                                       "vocab": list(self.data.vocab), "history": state.history})
        epochs = len(state.history)
        metrics = {"vae_model": self.model_name, "vae_epochs": epochs, "vae_train_seconds": round(train_seconds, 2),
                   "vae_seconds_per_epoch": round(train_seconds / max(epochs, 1), 2),
                   "vae_final_loss": state.history[-1]["loss"] if state.history else None}
        metrics.update(self.evaluate(model))
        arch = None
        if self.options.bo is not None:
            arch, bo_metrics = self.latent_bo(model)
            metrics.update(bo_metrics)
        if arch is None:  # no BO (or no valid proposal): the best measured training architecture
            train = self.task.train
            i = int(torch.argmax(train.y))
            adj, types = train.graphs.index([i]).graphs()[0]
            arch = self._arch((adj, types), strategy=self.name, source="dataset (best training architecture)",
                              **{self.task.metric: float(train.y[i])})
        return SearchResult(arch, metrics)
