"""NAS-Bench-Graph's architectures as DAGs for graph VAEs, valued by validation performance."""

import numpy as np
import pytest

pytest.importorskip("nas_bench_graph")

from attnas import registry  # noqa: E402
from attnas.data.nas_bench_graph import load_table  # noqa: E402
from attnas.data.nas_bench_graph_dags import load_dags  # noqa: E402
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace  # noqa: E402
from attnas.strategies.graph_vae import GraphVAEStrategy  # noqa: E402
from attnas.tasks.architecture_performance import ArchitecturePerformanceConfig, ArchitecturePerformanceTask  # noqa: E402


def test_every_architecture_once_valued_by_validation_not_test():
    data = load_dags("proteins")
    assert len(data.train) + len(data.test) == 2_021 and len(data.train) == int(2_021 * 0.9)
    assert data.train.vocab == ("input", "output", "gcn", "sage", "arma", "fc", "skip")
    space = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins"))
    table = load_table("proteins")
    valid = dict(zip(table.codes.tolist(), table.valid.tolist()))
    test = dict(zip(table.codes.tolist(), table.test.tolist()))
    codes = []
    for part in (data.train, data.test):
        for k, (adj, types) in enumerate(part.graphs.graphs()):
            arch = space.from_dag(adj, part.labels(types))
            code = space.index.codes[space.index_of(arch)]
            codes.append(code)
            assert part.y[k].item() == pytest.approx(valid[code], abs=1e-6)
            if abs(valid[code] - test[code]) > 1e-3:
                assert part.y[k].item() != pytest.approx(test[code], abs=1e-6)
    assert sorted(codes) == table.codes.tolist()
    again = load_dags("proteins", seed=1)
    assert not np.array_equal(again.train.y.numpy(), data.train.y.numpy())


def test_registered_for_the_graph_vae_strategy():
    assert {f"nbg-{d}" for d in ("cora", "proteins")} <= set(registry.names("dataset", "architectures"))
    task = ArchitecturePerformanceTask(ArchitecturePerformanceConfig(dataset="nbg-proteins"))
    space = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins"))
    space.check_task(task)
    GraphVAEStrategy.check_task(GraphVAEStrategy.Config(), space, task)
