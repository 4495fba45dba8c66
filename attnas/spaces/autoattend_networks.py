"""What the AutoAttend space builds its networks from: a domain adapter per task kind, and the
plain :class:`~attnas.models.autoattend_network.AutoAttendNetworkConfig` made from the space's
options, the task's sizes and the adapter.

A *domain adapter* (graphs: :mod:`attnas.spaces.autoattend_graph`, text:
:mod:`attnas.spaces.autoattend_text`, or a plugin's) is registered per task kind with
:func:`register_adapter`. Instantiated with the space and the task's
:class:`~attnas.tasks.base.TaskInfo` (where it refuses options it cannot build), it provides
``stem()``, ``head()``, ``attention()`` and ``op(name, in_dim, out_dim, last)``
(:class:`~attnas.models.autoattend_network.NetworkParts`), and may set three class
attributes (defaults in brackets):

- ``input_dropout`` [the space's ``dropout``]: dropout on each operation's input;
- ``add_dropout`` [0]: dropout on the sum of an *addition* layer;
- ``per_layer_attention`` [False]: one attention module per layer instead of one shared module.
"""

from __future__ import annotations

from typing import Any

from attnas import registry
from attnas.core.errors import UnsupportedError
from attnas.models.autoattend_network import AutoAttendNetworkConfig
from attnas.tasks.base import TaskInfo

_ADAPTERS: dict[str, type] = {}
#: Task kind -> the module that registers the built-in adapter (imported on first use: the
#: graph adapter needs torch_geometric, which a text search does not).
ADAPTER_MODULES = {"node": "attnas.spaces.autoattend_graph", "text": "attnas.spaces.autoattend_text"}


def register_adapter(kind: str):
    """Register the domain adapter for tasks of ``kind`` (class decorator)."""

    def deco(cls: type) -> type:
        _ADAPTERS[kind] = cls
        return cls

    return deco


def check_kind(kind: str) -> None:
    """Raise :class:`UnsupportedError` unless an adapter for tasks of ``kind`` is registered."""
    if kind not in _ADAPTERS and kind in ADAPTER_MODULES:
        registry.load_module(ADAPTER_MODULES[kind], f"space 'autoattend' on '{kind}' tasks")
    if kind not in _ADAPTERS:
        registry.discover()  # a plugin's adapter
    if kind not in _ADAPTERS:
        raise UnsupportedError(
            f"space 'autoattend' has no networks for '{kind}' tasks; supported: {', '.join(sorted(_ADAPTERS))}"
        )


def adapter_for(space: Any, info: TaskInfo) -> Any:
    """The domain adapter for a task, instantiated for ``space``'s options."""
    check_kind(info.kind)
    return _ADAPTERS[info.kind](space, info)


def network_config(space: Any, info: TaskInfo) -> AutoAttendNetworkConfig:
    """What the networks of ``space`` (an :class:`~attnas.spaces.autoattend.AutoAttendSpace`)
    are built from on a task with ``info``."""
    adapter = adapter_for(space, info)
    opts = space.options
    return AutoAttendNetworkConfig(
        layers=opts.layers, hidden=opts.hidden, in_dim=info.in_dim, num_classes=info.num_classes,
        raw_input=opts.stem == "raw", scores_output=opts.head == "none", context=opts.context,
        layer_types=tuple(opts.layer_types), ops=tuple(space.ops),
        input_dropout=getattr(adapter, "input_dropout", opts.dropout),
        add_dropout=getattr(adapter, "add_dropout", 0.0),
        per_layer_attention=bool(getattr(adapter, "per_layer_attention", False)), parts=adapter,
        residual=opts.block == "residual")
