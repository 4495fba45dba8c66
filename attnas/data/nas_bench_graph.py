"""NAS-Bench-Graph's lookup tables, read without running code.

Qin et al., *NAS-Bench-Graph: Benchmarking Graph Neural Architecture Search*, NeurIPS 2022
Datasets and Benchmarks. The PyPI package ``nas-bench-graph`` (1.4, Apache-2.0; attnas's
optional extra ``nasbench``) ships one pickle per dataset in its ``light/`` folder: a dict
from an architecture's code (:mod:`attnas.spaces.nas_bench_graph_canonical`) to
``{"valid_perf", "perf", "latency", "para"}``: validation and test performance (means over
three training seeds), inference latency in seconds and parameters in millions. The files
are read with :class:`~attnas.data.safe_pickle.RestrictedUnpickler`, which builds NumPy
scalars and nothing else.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnas.core.errors import DataError, unknown_name
from attnas.data.safe_pickle import NUMPY_ARRAYS, restricted_load

#: The nine datasets, in the benchmark's order (``proteins``: 2,021 architectures of 5 operations).
DATASETS = ("cora", "citeseer", "pubmed", "cs", "physics", "photo", "computers", "arxiv", "proteins")

INSTALL_HINT = 'NAS-Bench-Graph\'s tables come with the optional package nas-bench-graph: pip install "attnas[nasbench]"'


@dataclass(frozen=True)
class BenchTable:
    """One dataset's table, as arrays in the order of ascending code.

    Attributes:
        dataset: The dataset.
        codes: The architectures' codes, ascending (``int64``).
        valid: Validation performance (a fraction).
        test: Test performance (a fraction).
        latency: Inference latency (seconds).
        params: Parameters (millions).
    """

    dataset: str
    codes: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    latency: np.ndarray
    params: np.ndarray


def tables_folder() -> Path:
    """The package's ``light/`` folder.

    Raises:
        DataError: When the package is not installed (one line saying how to install it).
    """
    spec = importlib.util.find_spec("nas_bench_graph")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(INSTALL_HINT)
    return Path(next(iter(spec.submodule_search_locations))) / "light"


@functools.lru_cache(maxsize=None)
def load_table(dataset: str) -> BenchTable:
    """The table of ``dataset`` (read once per process).

    Raises:
        DataError: For an unknown dataset, a missing package or file, or a file that is not
            a table of the expected shape.
    """
    if dataset not in DATASETS:
        raise DataError(unknown_name("NAS-Bench-Graph dataset", dataset, DATASETS))
    path = tables_folder() / f"{dataset}.bench"
    try:
        raw = restricted_load(path, NUMPY_ARRAYS)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    except Exception as exc:
        raise DataError(f"{path}: not a NAS-Bench-Graph table ({type(exc).__name__}: {exc})") from None
    try:
        codes = np.array(sorted(raw), dtype=np.int64)
        columns = {name: np.array([float(raw[c][name]) for c in codes.tolist()])
                   for name in ("valid_perf", "perf", "latency", "para")}
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: not a NAS-Bench-Graph table (entry without {exc})") from None
    return BenchTable(dataset, codes, columns["valid_perf"], columns["perf"], columns["latency"], columns["para"])
