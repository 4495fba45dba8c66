"""The NAS-Bench-Graph space and cora task shared by the table tests (one of each per process).

Not a test module: imported as ``from nas_bench_graph_tables import cora_space, cora_task``
(tests/ is on the path). Needs the optional package ``nas-bench-graph``.
"""

import functools

from attnas.spaces.nas_bench_graph import NasBenchGraphSpace
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig


@functools.lru_cache(maxsize=None)
def cora_space() -> NasBenchGraphSpace:
    """The nine-operation space (its index is built once)."""
    return NasBenchGraphSpace()


@functools.lru_cache(maxsize=None)
def cora_task() -> NasBenchGraphTask:
    """The cora table as a task."""
    return NasBenchGraphTask(NasBenchGraphTaskConfig("cora"))
