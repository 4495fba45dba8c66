#!/bin/bash
# DARTFormer quick-scale experiments (docs/results/dartformer.md). One thread per process.
cd "$(dirname "$0")/../../.."  # the repository root
export OMP_NUM_THREADS=1 ATTNAS_PROGRESS=0 PYTHONPATH=.
A="${PYTHON:-python} -m attnas"
mkdir -p runs
LOG=runs/experiments.log
step() {  # step NAME COMMAND...
  local name=$1; shift
  local t0=$(date +%s.%N); local l0=$(cut -d' ' -f1-3 /proc/loadavg)
  "$@" > runs/$name.out 2>&1; local rc=$?
  local t1=$(date +%s.%N); local l1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "$name rc=$rc wall=$(echo "$t1 - $t0" | bc) load_start=[$l0] load_end=[$l1] cmd=$*" >> $LOG
}
step search-homogeneous $A search dartformer-listops-quick --out runs/dartformer-listops-quick
step retrain-homogeneous $A retrain runs/dartformer-listops-quick --seeds 3
step search-one-shot $A search dartformer-listops-one-shot-quick --out runs/dartformer-listops-one-shot-quick
step retrain-one-shot $A retrain runs/dartformer-listops-one-shot-quick --seeds 3
step search-prune $A search dartformer-listops-prune-quick --out runs/dartformer-listops-prune-quick
step retrain-prune $A retrain runs/dartformer-listops-prune-quick --seeds 3
for m in softmax linear performer linformer reformer local longformer bigbird sparse synthesizer-dense synthesizer-random; do
  step search-mech-$m $A search mechanism-listops-quick --set strategy.arch.mechanism=$m --out runs/mechanism-listops-quick-$m
  step retrain-mech-$m $A retrain runs/mechanism-listops-quick-$m --seeds 3
done
echo ALL-DONE >> $LOG
