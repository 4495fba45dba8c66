"""The AutoAttend networks built from the config the space makes are the networks built before
it existed: the same parameters, bit for bit, and the same outputs.

The checksums were taken from the networks built through the space object (before
:class:`~attnas.models.autoattend_network.AutoAttendNetworkConfig`), with the seeds below.
"""

from __future__ import annotations

import hashlib
import random

import pytest
import torch
from test_autoattend_text import TinyTextTask, text_space

from attnas.models.autoattend_network import AutoAttendModel, AutoAttendNetworkConfig, AutoAttendSupernet
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
from attnas.spaces.autoattend_networks import network_config
from attnas.tasks.base import TaskInfo
from attnas.tasks.node_classification import NodeBatch


class TinyTask:
    """A stand-in node-classification task: a random graph of 30 nodes, 12 features, 3 classes."""

    def __init__(self, n=30, f=12, c=3, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x, self.edge_index = torch.rand(n, f, generator=g), torch.randint(0, n, (2, 90), generator=g)
        self.y = torch.randint(0, c, (n,), generator=g)
        self.info = TaskInfo("node", f, c)

    def batch(self):
        return NodeBatch(self.x, self.edge_index, self.y, None)


def checksum(module: torch.nn.Module) -> str:
    """SHA-256 of a module's state (names, shapes, dtypes and bytes), first 16 hex digits."""
    h = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        h.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def graph_space():
    return AutoAttendSpace(AutoAttendConfig(layers=3, hidden=16, pool="pyg", act="tanh"))


def raw_graph_space():
    return AutoAttendSpace(AutoAttendConfig(layers=2, hidden=8, pool="mp", stem="raw", head="none",
                                            ops=("zero", "gcn", "gat", "linear")))


CASES = {  # name: (space, task, batch of the task)
    "graph": (graph_space, TinyTask, lambda task: task.batch()),
    "graph-raw-input": (raw_graph_space, TinyTask, lambda task: task.batch()),
    "text": (text_space, TinyTextTask, lambda task: task.batch([5, 3, 7])),
}
#: name -> (supernet state, model state, supernet output sum, model output sum), as built before.
BEFORE = {
    "graph": ("aa35c3a070ba458a", "a40b99f53c90d2a4", 0.4904640316963196, -3.390493903309107),
    "graph-raw-input": ("756f0e65125b6c69", "4f391d331dd68946", -7.233763411641121, -46.05627100169659),
    "text": ("4bcf43f7293e0861", "3ef12a8f08416db9", -0.8442174457013607, -0.1808951161801815),
}


def built(name: str):
    make_space, make_task, make_batch = CASES[name]
    space, task = make_space(), make_task()
    torch.manual_seed(0)
    supernet = space.supernet(task).eval()
    arch = space.sample(random.Random(3))
    torch.manual_seed(1)
    model = space.build(arch, task).eval()
    return space, task, arch, supernet, model, make_batch(task)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_networks_are_those_built_before_the_config(name):
    space, task, arch, supernet, model, batch = built(name)
    with torch.no_grad():
        sup_out, model_out = supernet(batch, arch), model(batch)
    sup_state, model_state, sup_sum, model_sum = BEFORE[name]
    assert (checksum(supernet), checksum(model)) == (sup_state, model_state)
    assert float(sup_out.double().sum()) == pytest.approx(sup_sum, rel=1e-5, abs=1e-6)
    assert float(model_out.double().sum()) == pytest.approx(model_sum, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_network_built_from_the_config_alone_equals_the_spaces(name):
    """The space's networks are the config's: built directly from it, the same state and outputs."""
    space, task, arch, supernet, model, batch = built(name)
    config = network_config(space, task.info)
    assert isinstance(config, AutoAttendNetworkConfig)
    torch.manual_seed(0)
    direct_supernet = AutoAttendSupernet(config).eval()
    torch.manual_seed(1)
    direct_model = AutoAttendModel(network_config(space, task.info), arch).eval()
    assert checksum(direct_supernet) == checksum(supernet) and checksum(direct_model) == checksum(model)
    with torch.no_grad():
        assert torch.equal(direct_supernet(batch, arch), supernet(batch, arch))
        assert torch.equal(direct_model(batch), model(batch))


def test_the_config_holds_the_spaces_sizes_and_the_adapters_dropouts():
    text = network_config(text_space(dropout=0.2), TinyTextTask().info)
    assert (text.layers, text.hidden, text.ops[:1], text.input_dropout, text.add_dropout,
            text.per_layer_attention) == (4, 16, text_space().ops[:1], 0.0, 0.2, True)
    graph = network_config(raw_graph_space(), TinyTask().info)
    assert (graph.input_dropout, graph.add_dropout, graph.per_layer_attention) == (0.6, 0.0, False)
    assert graph.widths() == [12, 8, 3]  # the raw features, hidden, the class scores
