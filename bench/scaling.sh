#!/usr/bin/env bash
# Scaling of the MLP training step (docs/benchmarks.md): batch 32 … 1024 at width 512, and
# width 128 … 2048 at batch 128, at 1 and 2 threads, bitgrad and PyTorch (its set-up per thread
# count given as arguments, e.g. the fastest of bench/peer.sh), 100 steps each after a warm-up.
#   bench/scaling.sh BUILD_DIR OUT_DIR TORCH_SETUP_AT_1_THREAD TORCH_SETUP_AT_2_THREADS
# (a set-up of bench/torch_setups.sh)
set -euo pipefail
build=$1
out=$2
here=$(dirname "$0")
res="$out/scaling.jsonl"
: >"$res"

source "$here/torch_setups.sh"

points=()
for b in 32 64 128 256 512 1024; do points+=("$b 512"); done
for w in 128 256 1024 2048; do points+=("128 $w"); done
for t in 1 2; do
  setup=$3
  [ "$t" = 2 ] && setup=$4
  w=0
  [ "$t" -lt "$(nproc)" ] && w=1
  for p in "${points[@]}"; do
    read -r b width <<<"$p"
    "$build/bin/step_bench" --config examples/fashion_mlp.toml --threads "$t" --workers "$w" --steps 100 --batch "$b" --width "$width" >>"$res"
    run_torch "$setup" "$t" --model mlp --steps 100 --batch "$b" --width "$width" >>"$res"
  done
  echo "scaling: $t thread(s) done" >&2
done
