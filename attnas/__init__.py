"""attnas: neural architecture search for attention.

The public Python API, importable from the package itself::

    import attnas

    run = attnas.search("autoattend-cora-quick", ["seed=1"], out="runs/cora-s1")
    model = attnas.load_model(run.path)            # a plain nn.Module with the trained weights
    attnas.retrain(run.path, seeds=3)              # mean and std go to metrics.json
    attnas.names("space")                          # registered spaces
    space = attnas.create("space", "autoattend")   # with its default options

Importing the package is cheap: each public name is imported from its module on first use.

Attributes:
    __version__: The installed distribution's version (``0+unknown`` when not installed).
"""

import importlib

#: Public name -> the module that defines it.
_EXPORTS = {
    "__version__": "attnas._version",
    # runs: search, continue, retrain, rebuild and score the final model
    "search": "attnas.pipeline",
    "resume": "attnas.pipeline",
    "evaluate": "attnas.pipeline",
    "load_model": "attnas.pipeline",
    "check_arch_file": "attnas.pipeline",
    "retrain": "attnas.training.retraining",
    # the registry of spaces, strategies, tasks, datasets and operations
    "names": "attnas.registry",
    "entries": "attnas.registry",
    "get": "attnas.registry",
    "create": "attnas.registry",
    "register_space": "attnas.registry",
    "register_strategy": "attnas.registry",
    "register_task": "attnas.registry",
    "register_dataset": "attnas.registry",
    "register_op": "attnas.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    """Import a public name from its module on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'attnas' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
