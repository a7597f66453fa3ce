#!/usr/bin/env bash
# The main job: train examples/fashion_mlp.toml (784-512-512-10 MLP on Fashion-MNIST) for one
# epoch on 1 thread, and again on 2 threads with 3 data-loader workers; the two runs must end
# with the same fingerprint of their trained weights and optimizer state, and `bitgrad diff`
# finds their step traces identical.
set -euo pipefail
build=${1:-build}
bin=$build/bin/bitgrad
runs=$build/demo-runs
rm -rf "$runs"
"$bin" --version
echo
echo "== run 1: 1 thread, loading on the training thread"
"$bin" train examples/fashion_mlp.toml --epochs 1 --threads 1 --workers 0 --out "$runs/threads1" --no-progress | tee "$runs.1.log"
echo
echo "== run 2: 2 threads, 3 data-loader workers"
"$bin" train examples/fashion_mlp.toml --epochs 1 --threads 2 --workers 3 --out "$runs/threads2" --no-progress | tee "$runs.2.log"
a=$(tail -n 1 "$runs.1.log" | awk '{print $2}')
b=$(tail -n 1 "$runs.2.log" | awk '{print $2}')
acc=$(grep -o 'test accuracy [0-9.]*%' "$runs.2.log" | tail -n 1)
echo
if [ "$a" = "$b" ]; then
  echo "identical fingerprints: $a ($acc)"
  echo
  echo "== bitgrad diff: the two runs step by step (trace.jsonl)"
  "$bin" diff "$runs/threads1" "$runs/threads2" --no-replay
else
  echo "FINGERPRINTS DIFFER: $a vs $b — the reproducibility contract is broken" >&2
  exit 1
fi
