#!/bin/bash
# The reduced-budget Fashion-MNIST experiments of docs/results/autola.md, round 3 (CPU, one thread).
# Assumes the seven ResNet-20 runs of round 2 exist under $RUNS (see that page for their commands).
# Adds, in this order (each step is resumable; a finished step is skipped):
#   A. transfer of the searched cell to ResNet-32 (the paper's Table 1 protocol: search on
#      ResNet-20, train the same cell in a deeper backbone), beside plain ResNet-32
#   B. one more retraining seed (seed 100) of plain and searched ResNet-20
#   C. +SE and +CBAM ResNet-32
#   D. seed 100 of the other ResNet-20 rows
#   E. the same transfer to ResNet-56 (plain and searched only)
#   F. a third seed (seed 101) of each ResNet-20 row
# usage: RUNS=/tmp/i4/fm nice -n 10 bash docs/results/autola/fashionmnist_cpu.sh > /tmp/i4/r3.log 2>&1 &
set -u
cd "$(dirname "$0")/../../.."  # the repository root
RUNS=${RUNS:-/tmp/i4/fm}
LOG=$RUNS/log.txt
COMMON="--set task.train_subset=3000 --set task.test_subset=5000 --set retrain.epochs=4 --set retrain.batch_size=64 --set retrain.lr=0.05"
export ATTNAS_DATA=${ATTNAS_DATA:-/work/shared/data} ATTNAS_PROGRESS=0 PYTHONPATH=.
PY=${PY:-python}

step() {  # step NAME ARGS... : run `attnas --threads 1 ARGS`, logging wall time, CPU time and load
  local name=$1; shift
  echo "START $name $(date +%s) load $(cut -d' ' -f1-3 /proc/loadavg) :: attnas --threads 1 $*" >> "$LOG"
  local s=$(date +%s)
  /usr/bin/time -f "%e s wall %U s user" -o "$RUNS/$name.time" $PY -m attnas --threads 1 "$@" > "$RUNS/$name.out" 2>&1
  echo "END $name rc=$? $(( $(date +%s) - s )) s load $(cut -d' ' -f1-3 /proc/loadavg) cpu $(cat "$RUNS/$name.time")" >> "$LOG"
}

transfer() {  # transfer BACKBONE VARIANT... (variant "" = the searched cell)
  local bb=$1; shift
  mkdir -p "$RUNS-$bb"
  for v in "$@"; do
    local out=$RUNS-$bb/autola-fashionmnist$v
    [ -f "$out/metrics.json" ] && continue
    if [ -z "$v" ]; then
      step "$bb-autola" search autola-fashionmnist-hog-se --out "$out" $COMMON --set space.backbone=$bb \
        --set strategy.arch=null --set strategy.arch_file=$RUNS/autola-fashionmnist/arch.json
    else
      step "$bb$v" search autola-fashionmnist$v --out "$out" $COMMON --set space.backbone=$bb
    fi
  done
}

seeds() {  # seeds N VARIANT... : retrain these ResNet-20 rows with N extra seeds (variant "" = searched)
  local n=$1; shift
  for v in "$@"; do
    [ -f "$RUNS/autola-fashionmnist$v/retrain/fashion-mnist/scratch/seed-$((n - 1)).json" ] && continue
    step "retrain$n-autola-fashionmnist$v" retrain "$RUNS/autola-fashionmnist$v" --seeds "$n"
  done
}

transfer resnet32 -plain ""
seeds 1 -plain ""
transfer resnet32 -se -cbam
seeds 1 -se -cbam -hog-se -random -hog-cbam
transfer resnet56 -plain ""
seeds 2 -plain "" -se -cbam -hog-se -random -hog-cbam
echo "ALL DONE $(date +%s)" >> "$LOG"
