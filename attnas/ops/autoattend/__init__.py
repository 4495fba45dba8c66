"""The operation pools of AutoAttend (Guan, Wang & Zhu, ICML 2021, Table 3 and Sec. 5.2).

Graph operations (``graph_*``: the Cora/PPI pool of torch_geometric layers, the attention
operations, the heterophilous-graph pool and the cached graph context they share) and text
operations (:mod:`~attnas.ops.autoattend.text`: convolutions, pooling, GRU and attention over
padded token sequences, with their :class:`~attnas.ops.autoattend.sequence_context.SequenceContext`).
"""
