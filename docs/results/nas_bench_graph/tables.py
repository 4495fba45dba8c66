"""How validation and test agree in NAS-Bench-Graph's tables (docs/results/nas_bench_graph.md).

For each dataset: Spearman's rank correlation of validation and test performance over all
architectures and over the top 1 % by validation, and the test performance of the best
architecture on validation beside the best test performance in the table::

    PYTHONPATH=. python -m docs.results.nas_bench_graph.tables
"""

import numpy as np
from scipy import stats

from attnas.data.nas_bench_graph import DATASETS, load_table

print("| dataset | architectures | Spearman (all) | Spearman (top 1 % on val.) | test of best on val. (%) | best test (%) |")
print("|---|---:|---:|---:|---:|---:|")
for d in DATASETS:
    t = load_table(d)
    top = np.argsort(-t.valid)[: max(1, round(0.01 * len(t.codes)))]
    r_all = stats.spearmanr(t.valid, t.test).statistic
    r_top = stats.spearmanr(t.valid[top], t.test[top]).statistic
    print(f"| {d} | {len(t.codes)} | {r_all:.3f} | {r_top:.3f} ({len(top)}) | {100 * t.test[np.argmax(t.valid)]:.2f} "
          f"| {100 * t.test.max():.2f} |")
