#!/bin/bash
# Full-attention NAS (Zhou et al., 2021) at CPU scale on Fashion-MNIST (docs/results/fullattn.md):
# the searched network, the two Table VII ablations and the all-local-SA baseline, with the
# same reduced settings for all four (one thread each, run side by side, niced).
cd "$(dirname "$0")/../../.."  # the repository root
export OMP_NUM_THREADS=1 ATTNAS_PROGRESS=0 PYTHONPATH=.
A="nice -n 10 ${PYTHON:-python} -m attnas --threads 1"
SEED=${SEED:-0}
OUT=${OUT:-runs/fullattn-seed$SEED}
mkdir -p $OUT
LOG=$OUT/experiments.log
# CPU scale: 600 training / 1000 test images resized to 8x8, no augmentation; search phase 2
# epochs, fine-tuning 2 epochs (alpha learning rates scaled up as in fullattn-digits-quick);
# retrain 8 epochs with Adam at 16 initial channels.
SMALL="--set seed=$SEED --set task.train_subset=600 --set task.test_subset=1000 --set task.resize=8 --set task.augment=false
 --set task.batch_size=32 --set space.final_channels=16 --set strategy.pretext_epochs=2 --set strategy.epochs=2
 --set strategy.pretext_arch_lr=0.003 --set strategy.arch_lr=0.001
 --set retrain.epochs=8 --set retrain.optimizer=adam --set retrain.lr=0.003 --set retrain.weight_decay=0.0001
 --set retrain.batch_size=32"
BASE="--set seed=$SEED --set task.train_subset=600 --set task.test_subset=1000 --set task.resize=8 --set task.augment=false
 --set task.batch_size=32 --set space.final_channels=16
 --set retrain.epochs=8 --set retrain.optimizer=adam --set retrain.lr=0.003 --set retrain.weight_decay=0.0001
 --set retrain.batch_size=32"
step() {  # step NAME COMMAND...
  local name=$1; shift
  local t0=$(date +%s.%N); local l0=$(cut -d' ' -f1-3 /proc/loadavg)
  "$@" > $OUT/$name.out 2>&1; local rc=$?
  local t1=$(date +%s.%N); local l1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "$name rc=$rc wall=$(echo "$t1 - $t0" | bc) load_start=[$l0] load_end=[$l1] cmd=$*" >> $LOG
}
step searched $A search fullattn-fashionmnist $SMALL --out $OUT/searched &
step no-car $A search fullattn-fashionmnist-no-car $SMALL --out $OUT/no-car &
step no-sss-no-car $A search fullattn-fashionmnist-no-sss-no-car $SMALL --out $OUT/no-sss-no-car &
step local-sa $A search fullattn-fashionmnist-local-sa $BASE --out $OUT/local-sa &
wait
echo ALL-DONE >> $LOG
