#!/bin/bash
# DARTFormer on byte-level SST-2, CPU scale (docs/results/dartformer.md). One thread per
# process, two processes at a time (JOBS=2), each step niced; runs/sst2-experiments.log gets
# each step's wall time and load average. Steps are queued in priority order: the searches
# (seed 0 of every mechanism), NAS One-shot, the retrains (seeds 100, 101), NAS Prune.
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1 ATTNAS_PROGRESS=0 PYTHONPATH=.
export A="${PYTHON:-python} -m attnas"
export LOG=runs/sst2-experiments.log
mkdir -p runs
step() {  # step NAME COMMAND...
  local name=$1; shift
  local t0=$(date +%s.%N); local l0=$(cut -d' ' -f1-3 /proc/loadavg)
  nice -n 10 "$@" > runs/$name.out 2>&1; local rc=$?
  local t1=$(date +%s.%N); local l1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "$name rc=$rc wall=$(echo "$t1 - $t0" | bc) load_start=[$l0] load_end=[$l1] cmd=$*" >> $LOG
}
export -f step
MECHS="softmax linear performer linformer reformer local longformer bigbird sparse synthesizer-dense synthesizer-random"
{
  echo "sst-search-homogeneous $A search dartformer-sst2-bytes-quick --out runs/dartformer-sst2-bytes-quick"
  for m in $MECHS; do
    echo "sst-search-mech-$m $A search mechanism-sst2-bytes-quick --set strategy.arch.mechanism=$m --out runs/mechanism-sst2-bytes-quick-$m"
  done
  echo "sst-search-one-shot $A search dartformer-sst2-bytes-one-shot-quick --out runs/dartformer-sst2-bytes-one-shot-quick"
  for m in $MECHS; do
    echo "sst-retrain-mech-$m $A retrain runs/mechanism-sst2-bytes-quick-$m --seeds 2"
  done
  echo "sst-retrain-homogeneous $A retrain runs/dartformer-sst2-bytes-quick --seeds 2"
  echo "sst-retrain-one-shot $A retrain runs/dartformer-sst2-bytes-one-shot-quick --seeds 2"
  echo "sst-search-prune $A search dartformer-sst2-bytes-prune-quick --out runs/dartformer-sst2-bytes-prune-quick"
  echo "sst-retrain-prune $A retrain runs/dartformer-sst2-bytes-prune-quick --seeds 2"
} | xargs -P "${JOBS:-2}" -L 1 bash -c 'step "$@"' _
echo ALL-DONE >> $LOG
