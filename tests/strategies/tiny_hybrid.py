"""A seconds-long per-layer hybrid recipe on tiny MQAR (two layers of softmax, linear or local).

Shared by the ``random-trained`` and ``evolution-trained`` tests. Not a test module: imported
as ``from tiny_hybrid import HYBRID`` (pytest puts this folder on ``sys.path`` for its test
modules). ``HYBRID`` has no ``strategy``: each test adds its own.
"""

from __future__ import annotations

HYBRID = {
    "name": "tiny-hybrid",
    "seed": 0,
    "task": {"name": "mqar", "vocab_size": 16, "seq_len": 16, "num_pairs": 2, "train_size": 64, "val_size": 32,
             "test_size": 32, "batch_size": 32},
    "space": {"name": "attention-mechanisms", "candidates": ["softmax", "linear", "local"], "dim": 8, "depth": 2,
              "heads": 2, "ffn_dim": 8, "dropout": 0.0, "layout": "per-layer",
              "mechanism_options": {"local": {"window": 2}}},
    "retrain": {"epochs": 1, "patience": 0, "init": "scratch", "seeds": 1},
}

#: Costs measured on 2 sequences of 128 tokens (``strategy.costs``).
COSTS = {"batch_size": 2, "repeats": 2, "task": {"seq_len": 128, "train_size": 2}}


def hybrid_macs() -> dict[tuple[str, str], float]:
    """The measured multiply-accumulates of every two-layer hybrid of ``HYBRID`` on the costs' input."""
    from attnas.config import from_mapping
    from attnas.costs.config import CostsConfig
    from attnas.costs.cost_model import CostModel
    from attnas.spaces.attention_mechanisms import AttentionMechanismsConfig, AttentionMechanismSpace
    from attnas.tasks.associative_recall import MQARTask, MQARTaskConfig

    space = AttentionMechanismSpace(from_mapping(AttentionMechanismsConfig,
                                                 {k: v for k, v in HYBRID["space"].items() if k != "name"}))
    long_task = MQARTask(from_mapping(MQARTaskConfig, {**{k: v for k, v in HYBRID["task"].items() if k != "name"},
                                                       "seq_len": COSTS["task"]["seq_len"]}))
    model = CostModel(space, long_task, None, CostsConfig(batch_size=COSTS["batch_size"]))
    names = space.options.candidates
    return {(a, b): model.costs(space.arch({"mechanism": [a, b]}), ["macs"])["macs"] for a in names for b in names}
