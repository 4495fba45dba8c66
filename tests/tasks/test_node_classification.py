"""Node-classification task: batches, loss, metrics, transfer."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.tasks.node_classification import NodeClassificationConfig, NodeClassificationTask, micro_f1


def test_transductive_batches_loss_and_accuracy():
    task = NodeClassificationTask(NodeClassificationConfig(dataset="digits-graph"))
    b = next(task.batches("train"))
    assert int(b.mask.sum()) == 200
    perfect = torch.nn.functional.one_hot(b.y, 10).float() * 10
    assert task.evaluate(lambda batch: torch.nn.functional.one_hot(batch.y, 10).float(), "test") == 1.0
    assert task.loss(perfect, b) < 0.01
    assert task.evaluate(lambda batch: torch.zeros(batch.num_nodes, 10), "val") == pytest.approx(
        float((next(task.batches("val")).y[next(task.batches("val")).mask] == 0).float().mean()))
    # the splits share one cache of graph structures
    assert next(task.batches("val")).cache is b.cache




def test_ppi_task_micro_f1(tmp_path, write_ppi):
    write_ppi(tmp_path, graphs_per_split=(4, 1, 1))
    task = NodeClassificationTask(NodeClassificationConfig(dataset="ppi", batch_graphs=2), tmp_path)
    assert task.metric == "micro_f1" and task.info.multilabel and task.info.extra["inductive"]
    batches = list(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(0)))
    assert len(batches) == 2 and batches[0].num_nodes == 12 and batches[0].mask is None
    assert task.evaluate(lambda b: b.y * 2 - 1, "test") == 1.0
    assert task.loss(torch.zeros(12, 4), batches[0]) == pytest.approx(torch.log(torch.tensor(2.0)).item())


def test_micro_f1():
    y = torch.tensor([[1, 0], [1, 1]])
    logits = torch.tensor([[1.0, 1.0], [-1.0, 1.0]])
    # tp=2 (0,0),(1,1); fp=1 (0,1); fn=1 (1,0)
    assert micro_f1(logits, y) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_unknown_or_non_graph_dataset():
    with pytest.raises(ConfigError, match="unknown dataset 'coraa'"):
        NodeClassificationTask(NodeClassificationConfig(dataset="coraa"))
