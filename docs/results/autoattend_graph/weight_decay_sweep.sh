#!/usr/bin/env bash
# Weight-decay sweep of the AutoAttend graph supernets (Cora: 5e-4, 1e-3, 2e-3; CiteSeer: 2e-3,
# 5e-3, 1e-2, each set explicitly where it is not the recipe's; five search seeds each): whole
# searches, SLOTS at a time, then each run's top-10 candidates (supernet_top_candidates.py) and
# 1,000 prior samples (supernet_selection_noise.py) scored.
# usage: R=RESULTS_DIR bash docs/results/autoattend_graph/weight_decay_sweep.sh DEADLINE_S SLOTS [--set ... for every search]
# (run from the repository root; searches still running DEADLINE_S seconds after the start are
# stopped, unfinished steps leave no row; on a GPU machine the searches and the scoring use it)
set -u
START=$(date +%s); DEADLINE=$1; SLOTS=$2; shift 2; EXTRA="$*"
export ATTNAS_DATA=${ATTNAS_DATA:-$PWD/.device-data} ATTNAS_PROGRESS=0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}; R=${R:-/tmp/r}; mkdir -p $R
$PY -c "import torch, torch_geometric; print(torch.__version__, torch_geometric.__version__, torch.cuda.is_available())"
DEV=cpu; $PY -c "import torch; assert torch.cuda.is_available(); torch.ones(1).cuda()" && DEV=cuda
export ATTNAS_STUDY_DEVICE=$DEV DEADLINE START R PY EXTRA DEV SAMPLES
# seconds to the deadline (at least 1: timeout takes no negative limit)
left() { l=$((DEADLINE - ($(date +%s) - START))); echo $(( l > 0 ? l : 1 )); }
job() {
  name=$1; recipe=$2; shift 2
  timeout $(left) $PY -m attnas --threads 1 search $recipe --device $DEV --set seed=$SEED "$@" $EXTRA --out $R/$name > $R/$name.log 2>&1 || { echo "$name: search rc $? at $(( $(date +%s) - START )) s"; return; }
  echo "$name: search done at $(( $(date +%s) - START )) s"
  timeout $(left) $PY -m docs.results.autoattend_graph.supernet_top_candidates $R/$name --out $R/$name.top.jsonl >> $R/$name.log 2>&1 || echo "$name: top rc $?"
  timeout $(left) $PY -m docs.results.autoattend_graph.supernet_selection_noise $R/$name --samples ${SAMPLES:-1000} --out $R/$name.noise.jsonl >> $R/$name.log 2>&1 || echo "$name: noise rc $?"
  echo "$name: all done at $(( $(date +%s) - START )) s"
}
export -f job left
for s in 0 1 2 3 4; do
  echo "SEED=$s job cs-wd2e-3-s$s autoattend-citeseer --set strategy.supernet.weight_decay=0.002"
  echo "SEED=$s job cora-wd1e-3-s$s autoattend-cora --set strategy.supernet.weight_decay=0.001"
  echo "SEED=$s job cs-wd1e-2-s$s autoattend-citeseer --set strategy.supernet.weight_decay=0.01"
  echo "SEED=$s job cs-wd5e-3-s$s autoattend-citeseer --set strategy.supernet.weight_decay=0.005"
  echo "SEED=$s job cora-wd5e-4-s$s autoattend-cora"
  echo "SEED=$s job cora-wd2e-3-s$s autoattend-cora --set strategy.supernet.weight_decay=0.002"
done > $R/jobs.txt
for s in 0 1 2 3 4; do echo "SEED=$s job cs-wd5e-3-e4k-s$s autoattend-citeseer --set strategy.supernet.weight_decay=0.005 --set strategy.supernet.epochs=4000"; done >> $R/jobs.txt
(sleep 90; nvidia-smi > $R/smi.txt 2>&1; uptime >> $R/smi.txt) &
head -n ${NJOBS:-1000} $R/jobs.txt | xargs -P $SLOTS -I{} bash -c "{}"
echo "finished at $(( $(date +%s) - START )) s"
