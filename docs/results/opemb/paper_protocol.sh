#!/usr/bin/env bash
# Chatzianastasis et al.'s (2021) protocol (issue 23), one model after the other, resumable: rerun this script
# after an interruption and every run continues from its last epoch checkpoint.
#
#   ATTNAS_DATA=/work/shared/data nohup docs/results/opemb/paper_protocol.sh > opemb_protocol.log 2>&1 &
#
# Environment (defaults in brackets):
#   RUNS       where the run directories go [runs/opemb-protocol]
#   MODELS     models in order [dvae dvae-emb]; add "gcn gcn-emb" for the GCN rows
#   THREADS    torch threads [2]
#   PRECISION  fp32 | bf16 [fp32]
#   ITERATIONS T of Chatzianastasis et al., 2021, Sec. 3.3 [1]; the paper's DVAE-EMB uses 4 (4x the time)
#   GP_METHODS sparse GPs compared on the final latents [svgp fitc]
#   GP_INDUCING, GP_REPEATS, GP_MAXITER  their inducing points, repeats and FITC L-BFGS-B
#              iterations [500 10 100]. FITC on all 17,118 latents took about 20 s per fit with
#              200 inducing points (50 iterations, one thread); with 500 expect several times that.
#   PYTHON     the interpreter [python]
#
# Per model: RUNS/<model>/events.jsonl has one "vae" event per epoch (loss, recon, kld, lr,
# recon_accuracy, recon_greedy, seconds); metrics.json has Tables 1-2 and the latent-BO
# counts when the run is done; gp_compare.md has Table 2 for every sparse GP of GP_METHODS.
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
RUNS=${RUNS:-runs/opemb-protocol}
MODELS=${MODELS:-dvae dvae-emb}
THREADS=${THREADS:-2}
PRECISION=${PRECISION:-fp32}
ITERATIONS=${ITERATIONS:-1}
GP_METHODS=${GP_METHODS:-svgp fitc}
GP_INDUCING=${GP_INDUCING:-500}
GP_REPEATS=${GP_REPEATS:-10}
GP_MAXITER=${GP_MAXITER:-100}
PYTHON=${PYTHON:-python}
export PYTHONPATH=${PYTHONPATH:-.}
mkdir -p "$RUNS"
for m in $MODELS; do
  out="$RUNS/$m"
  echo "== $m -> $out ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ -f "$out/metrics.json" ]; then
    echo "   done already"
  elif [ -f "$out/config.yaml" ]; then
    "$PYTHON" -m attnas --threads "$THREADS" search --resume "$out"
  else
    "$PYTHON" -m attnas --threads "$THREADS" search opemb-enas-protocol --set strategy.model="$m" \
        --set strategy.precision="$PRECISION" --set strategy.iterations="$ITERATIONS" --out "$out"
  fi
  if [ ! -f "$out/gp_compare.md" ]; then
    "$PYTHON" docs/results/opemb/gp_compare.py --threads "$THREADS" --run "$out" --methods $GP_METHODS \
        --inducing "$GP_INDUCING" --repeats "$GP_REPEATS" --maxiter "$GP_MAXITER" > "$out/gp_compare.md.tmp" && mv "$out/gp_compare.md.tmp" "$out/gp_compare.md"
  fi
done
echo "== all done ($(date -u +%FT%TZ))"
