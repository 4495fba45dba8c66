"""What the tests' fork server (:mod:`forked_attnas`) imports before it forks a child:
torch, the command line, every component module that ``attnas.registry.discover`` would
import (without running it: a child discovers the plugins itself), torch_geometric and
scikit-learn (the digits graph's data and neighbours). Not a test module.

torch comes first, as in ``python -m attnas``: with scikit-learn (its own OpenMP library)
loaded before torch, a search gave other floats than in a new Python.
"""

import importlib
import pkgutil

import torch  # noqa: F401  (first: see above)

from attnas import registry
import attnas.cli  # noqa: F401
import attnas.pipeline  # noqa: F401
import attnas.training.retraining  # noqa: F401

for _package in registry._PACKAGES:
    for _info in pkgutil.walk_packages(importlib.import_module(_package).__path__, prefix=_package + "."):
        if not _info.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(_info.name)

import sklearn.datasets  # noqa: E402,F401
import sklearn.neighbors  # noqa: E402,F401
import torch_geometric  # noqa: E402,F401
