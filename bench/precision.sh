#!/usr/bin/env bash
# Mixed precision against f32 on the same machine (docs/benchmarks.md, "Mixed precision"):
#  1. step time: build/bin/step_bench on the fortunes GPT and the Fashion-MNIST MLP in fp32,
#     bf16, bf16 with stochastic rounding and fp16, interleaved, PREC_REPS rounds (median of each
#     run's steps; the table takes the median over rounds);
#  2. quality: the full example trainings (the GPT's 2000 steps, the MLP's epoch) in each
#     precision: final validation loss / test accuracy and the fingerprint.
# Usage: bench/precision.sh [BUILD_DIR] [OUT_DIR]   (PREC_REPS=3, PREC_THREADS=2, PREC_QUALITY=1)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench-results-precision}
reps=${PREC_REPS:-3}
threads=${PREC_THREADS:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$out"
cfgdir=$(mktemp -d)
trap 'rm -rf "$cfgdir"' EXIT

make_cfg() {  # EXAMPLE NAME LINES
  local src=$1 name=$2 lines=$3
  awk -v add="$lines" '{print} /^\[train\]$/ && add != "" {n = split(add, a, ";"); for (i = 1; i <= n; i++) print a[i]}' "$src" > "$cfgdir/$name.toml"
}
for ex in gpt mlp; do
  src=examples/fortunes_gpt.toml
  [ "$ex" = mlp ] && src=examples/fashion_mlp.toml
  make_cfg "$src" "$ex-fp32" ""
  make_cfg "$src" "$ex-bf16" 'precision = "bf16"'
  make_cfg "$src" "$ex-bf16sr" 'precision = "bf16";rounding = "stochastic"'
  make_cfg "$src" "$ex-fp16" 'precision = "fp16"'
done

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), threads $threads" | tee "$out/steps.jsonl"
for r in $(seq 1 "$reps"); do
  for ex in gpt mlp; do
    steps=60
    [ "$ex" = mlp ] && steps=150
    for p in fp32 bf16 bf16sr fp16; do
      "$build/bin/step_bench" --config "$cfgdir/$ex-$p.toml" --threads "$threads" --steps "$steps" --label "$ex-$p" --trace none | tee -a "$out/steps.jsonl"
    done
  done
done

if [ "${PREC_QUALITY:-1}" = 1 ]; then
  : > "$out/quality.txt"
  for ex in gpt mlp; do
    for p in fp32 bf16 bf16sr fp16; do
      log=$("$build/bin/bitgrad" train "$cfgdir/$ex-$p.toml" --threads "$threads" --out "$out/run-$ex-$p" --no-progress 2>&1)
      last=$(echo "$log" | grep -E 'validation loss|test accuracy' | tail -1)
      fp=$(echo "$log" | awk '/^fingerprint/ {print $2}')
      skipped=$(grep -c '"skipped": true' "$out/run-$ex-$p/metrics.jsonl" || true)
      echo "$ex $p | $last | skipped steps $skipped | fingerprint $fp" | tee -a "$out/quality.txt"
      rm -rf "$out/run-$ex-$p/checkpoints"
    done
  done
fi
