#!/bin/bash
# The CPU-scale SST experiments of docs/results/autoattend_text.md, one after the other.
# Run from the repository root; run directories go under $OUT (default runs/). Each search
# resumes from its checkpoints with `attnas search --resume RUN_DIR` when interrupted, each
# retrain continues with the seeds it has not finished.
#
# Scale (the same for every row): 8 layers instead of 24, 6 supernet epochs (402 one-
# architecture steps), 150 architectures evaluated (population 100 + 2 rounds x 25
# children; random search: 150 samples), top 5 re-ranked for 1 epoch, retraining 8 epochs
# with patience 3 (lr 0.0005, batch 128, from scratch), 3-5 seeds.
set -u
export ATTNAS_DATA=${ATTNAS_DATA:-/work/shared/data} ATTNAS_PROGRESS=0
OUT=${OUT:-runs}
A="nice -n 10 python -m attnas --threads 1"
CPU="--set space.layers=8 --set strategy.supernet.epochs=6 --set strategy.supernet.checkpoint_every=2
     --set strategy.rerank.top_k=5 --set strategy.rerank.epochs=1 --set retrain.epochs=8 --set retrain.patience=3"
EVO="--set strategy.evolution.population=100 --set strategy.evolution.parents=25
     --set strategy.evolution.children=25 --set strategy.evolution.rounds=2 --set strategy.evolution.checkpoint_every=50"

# E1: AutoAttend search on SST-5, retrained on SST-5 and transferred to SST-2
$A search autoattend-sst5 --out $OUT/sst5-cpu $CPU $EVO
$A retrain $OUT/sst5-cpu --seeds 5
$A retrain $OUT/sst5-cpu --dataset sst2 --seeds 5
# E2: the Transformer baseline (8 layers here, the searched encoders' depth)
$A search transformer-sst5 --out $OUT/transformer-sst5-cpu --set space.layers=8 --set retrain.epochs=8 --set retrain.patience=3
$A retrain $OUT/transformer-sst5-cpu --seeds 5
$A retrain $OUT/transformer-sst5-cpu --dataset sst2 --seeds 5
# E3: random search with the same supernet and the same number of evaluated architectures.
# (The supernet phase is identical to E1's - same seed and settings - so the run recorded in
# docs/results took E1's finished supernet checkpoint instead of training it again.)
$A search autoattend-sst5-random --out $OUT/sst5-random-cpu $CPU --set strategy.samples=150 --set strategy.checkpoint_every=50
$A retrain $OUT/sst5-random-cpu --seeds 3
# E4: Table 6 - the same search in the baseline space (addition layers only, self-attention in the pool)
$A search autoattend-sst5-baseline-space --out $OUT/sst5-baseline-space-cpu $CPU $EVO
$A retrain $OUT/sst5-baseline-space-cpu --seeds 3
# The quick recipe as shipped
$A search autoattend-sst5-quick --out $OUT/sst5-quick
# Speed of the paper-scale (24-layer) supernet (the TARGET lines are the figures;
# on a quiet machine use --threads 2)
PYTHONPATH=. nice -n 10 python -m benchmarks.speed.bench_autoattend_text --threads 1 --steps 10 --epochs 1 --archs 10
