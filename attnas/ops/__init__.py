"""The operations of every search space, one package per method, each written as its paper's equation.

- :mod:`attnas.ops.autoattend`: the graph and text operation pools of AutoAttend (Guan, Wang
  & Zhu, ICML 2021) and the heterophilous-graph pool built beside them;
- :mod:`attnas.ops.autola`: AutoLA's gated attention modules and its high order group attention
  (HOGA) cell, discrete and relaxed (Ma et al., NeurIPS 2020);
- :mod:`attnas.ops.fullattn`: the local and non-local self-attention blocks of the stage-wise
  full-attention space (Zhou et al., 2021);
- :mod:`attnas.ops.attention_mechanisms`: the candidate attention mechanisms of DARTFormer
  (Brown et al., 2022);
- :mod:`attnas.ops.shared`: pieces more than one method uses (dropout, position encodings);
- :mod:`attnas.ops.overrides`: the hooks through which the optional package ``attnas.kernels``
  replaces an operation with a faster implementation of the same function.
"""
