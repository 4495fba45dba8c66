"""Reading pickled data files without running code.

Some dataset formats are Python pickles (CIFAR-10's batches, Planetoid's ``ind.*``
files). Unpickling calls whatever a file names, so a crafted file could run any code.
:class:`RestrictedUnpickler` builds only the ``(module, name)`` globals it is given;
anything else stops the load with :class:`pickle.UnpicklingError`. The allow-lists below
name what the formats use: plain containers need none; NumPy arrays, SciPy CSR matrices
and ``collections.defaultdict(list)`` need the entries of :data:`NUMPY_ARRAYS`,
:data:`SCIPY_CSR` and :data:`DEFAULTDICT_OF_LISTS`.

Example:
    >>> import io, pickle
    >>> import numpy as np
    >>> data = pickle.dumps({"x": np.arange(3)})
    >>> RestrictedUnpickler(io.BytesIO(data), NUMPY_ARRAYS).load()["x"].tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import pickle
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any

#: NumPy arrays and scalars (as NumPy 1.x and 2.x pickle them).
NUMPY_ARRAYS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
})

#: SciPy's CSR matrix (its fields are NumPy arrays: combine with :data:`NUMPY_ARRAYS`).
SCIPY_CSR = frozenset({
    ("scipy.sparse.csr", "csr_matrix"), ("scipy.sparse._csr", "csr_matrix"), ("scipy.sparse", "csr_matrix"),
})

#: ``collections.defaultdict(list)``, as Python 2 and 3 pickle it.
DEFAULTDICT_OF_LISTS = frozenset({
    ("collections", "defaultdict"), ("__builtin__", "list"), ("builtins", "list"),
})

#: Modules that moved: the name a pickle uses -> where the object lives now.
_MOVED = {
    "numpy.core.multiarray": "numpy._core.multiarray",
    "numpy.core.numeric": "numpy._core.numeric",
    "scipy.sparse.csr": "scipy.sparse",
    "scipy.sparse._csr": "scipy.sparse",
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only allow-listed globals.

    Args:
        file: A binary file object.
        allowed: The ``(module, name)`` pairs a pickle may name (as written in the file).
        **kwargs: Passed to :class:`pickle.Unpickler` (e.g. ``encoding="latin1"``).
    """

    def __init__(self, file: IO[bytes], allowed: Collection[tuple[str, str]], **kwargs: Any):
        super().__init__(file, **kwargs)
        self.allowed = frozenset(allowed)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        module = _MOVED.get(module, module)
        if module.startswith("numpy._core"):
            import numpy as np

            if not hasattr(np, "_core"):  # NumPy 1.x
                module = "numpy.core" + module[len("numpy._core"):]
        return super().find_class(module, name)


def restricted_load(path: str | Path, allowed: Collection[tuple[str, str]], encoding: str = "ASCII") -> Any:
    """Unpickle the file ``path``, building only the globals in ``allowed``.

    Args:
        path: The pickle file.
        allowed: The ``(module, name)`` pairs the file may name.
        encoding: How Python 2 ``str`` objects are decoded (``"bytes"`` keeps them as bytes).

    Raises:
        pickle.UnpicklingError: When the file names a global outside ``allowed``.
        OSError: When the file cannot be read.
        Exception: Whatever a truncated or malformed pickle raises (``EOFError``, ...).
    """
    with open(path, "rb") as f:
        return RestrictedUnpickler(f, allowed, encoding=encoding).load()
