#!/bin/sh
# The heterophily comparisons: for each dataset, the baselines' validation grid, then one
# `attnas compare` per search seed with the baselines' chosen settings. Run from the repository
# root with ATTNAS_DATA=../shared/data; writes runs/hetero-grid/ and runs/hetero/<dataset>-s<seed>/.
#   sh docs/results/heterophilous/experiments.sh texas wisconsin
set -e
for ds in "$@"; do
  python -m docs.results.heterophilous.baseline_grid "$ds" runs/hetero-grid > "runs/hetero-grid-$ds.log" 2>&1
  sets=$(tail -1 "runs/hetero-grid-$ds.log")
  for seed in 0 1 2; do
    # shellcheck disable=SC2086
    attnas --threads 1 compare autoattend-hetero --set "task.dataset=$ds" --set "seed=$seed" $sets \
      --set task.split=per-seed --search-seeds 1 --seeds 10 --out "runs/hetero/$ds-s$seed" > "runs/hetero/$ds-s$seed.log" 2>&1
  done
done
python -m docs.results.heterophilous.tables runs/hetero "$@"
# The protocol in which no architecture is chosen with labels of the nodes it is tested on:
# each of 10 search seeds searches, retrains (3 seeds) and tests on its own split.
for ds in "$@"; do
  sets=$(tail -1 "runs/hetero-grid-$ds.log")
  # shellcheck disable=SC2086
  attnas --threads 1 compare autoattend-hetero --set "task.dataset=$ds" --set task.split=search-seed $sets \
    --search-seeds 10 --seeds 3 --out "runs/hetero/$ds-by-split" > "runs/hetero/$ds-by-split.log" 2>&1
done
