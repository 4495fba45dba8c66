"""Graph variational autoencoders for architecture DAGs (Chatzianastasis et al., 2021; D-VAE, Zhang et al., 2019).

Modules, one purpose each:

- :mod:`~attnas.graphvae.dag_batch`: the padded tensor form of a batch of DAGs.
- :mod:`~attnas.graphvae.dag_dataset`: datasets of DAGs, built from any space's ``to_dag``.
- :mod:`~attnas.graphvae.op_encoding`: one-hot operations or learnable operation embeddings.
- :mod:`~attnas.graphvae.aggregation`: D-VAE's gated-sum message aggregation.
- :mod:`~attnas.graphvae.dvae_encoder`: the asynchronous (topological-order) D-VAE encoder.
- :mod:`~attnas.graphvae.gcn_encoder`: the simultaneous GCN encoder.
- :mod:`~attnas.graphvae.decoder`: the autoregressive DAG decoder shared by both encoders.
- :mod:`~attnas.graphvae.vae`: the VAE (config, reparameterisation, ELBO loss).
- :mod:`~attnas.graphvae.train`: a resumable training loop with explicit state.
- :mod:`~attnas.graphvae.gru`: GRU steps from precomputed products or a zero state.
- :mod:`~attnas.graphvae.step_products`: the linear maps of the sequential loops and the decoder's edge MLP.
- :mod:`~attnas.graphvae.reference_dvae`: D-VAE's per-graph procedure, one decision at a time (tests check the batched
  modules against it).
- :mod:`~attnas.graphvae.validity`: validity predicates for decoded DAGs.
- :mod:`~attnas.graphvae.metrics`: reconstruction accuracy, validity and uniqueness (Table 1).
- :mod:`~attnas.graphvae.gp`: the sparse GP on latent means (Table 2).
- :mod:`~attnas.graphvae.evaluator`: evaluators that score decoded architectures.
- :mod:`~attnas.graphvae.bo`: batch expected-improvement Bayesian optimisation in latent space.
- :mod:`~attnas.graphvae.analysis`: graph properties against performance and the t-SNE plot.
"""
