#!/usr/bin/env bash
# Contract T8: the selftest fingerprint, and trainings of the MLP, the CNN and the GPT, must be the same for GCC -O3 (the main build) and
# Clang -O0, on every code path this CPU has and on several thread counts.
# Usage: scripts/crosscheck.sh [MAIN_BUILD_DIR]
set -euo pipefail
main=${1:-build}
other=build-clang-O0
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cmake -S . -B "$other" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O0" \
  -DBITGRAD_BUILD_TESTS=OFF -DBITGRAD_BUILD_BENCH=OFF -DBITGRAD_BUILD_TOOLS=OFF >/dev/null
ninja -C "$other" bitgrad_cli >/dev/null

isas=(scalar)
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && isas+=(avx2)
grep -qw avx512f /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && isas+=(avx512)
# BITGRAD_HIDE_ISA (numerics.md §1) hides code paths from the library: compare only those it sees
case ${BITGRAD_HIDE_ISA:-} in avx512) isas=("${isas[@]/avx512}") ;; avx2) isas=(scalar) ;; esac
read -ra isas <<<"${isas[*]}"

want=$("$main/bin/bitgrad" selftest --threads 1 --isa scalar | awk '/^fingerprint/ {print $2}')
echo "crosscheck: reference fingerprint (gcc -O3, scalar, 1 thread): $want"
fail=0
for build in "$main" "$other"; do
  for isa in "${isas[@]}"; do
    for t in 1 2 3 8; do
      got=$("$build/bin/bitgrad" selftest --threads "$t" --isa "$isa" | awk '/^fingerprint/ {print $2}')
      name="$(basename "$build") isa=$isa threads=$t"
      if [ "$got" != "$want" ]; then
        echo "crosscheck: MISMATCH $name: $got"
        fail=1
      fi
    done
  done
done
if [ $fail -ne 0 ]; then
  echo "crosscheck: FAILED: builds or code paths disagree (contract T8)"
  exit 1
fi
echo "crosscheck: selftest identical for gcc -O3 and clang -O0 on ${isas[*]} at threads 1, 2, 3, 8"

# Trainings: CONFIG, STEPS, a label, and the code paths the Clang -O0 build trains on (default: all
# this CPU has); the GCC -O3 build trains on every path. Every fingerprint must agree.
train_everywhere() {
  local config=$1 steps=$2 label=$3 want="" got start=$SECONDS
  local -a other_isas=("${isas[@]}")
  [ -z "${4:-}" ] || other_isas=("$4")
  for build in "$main" "$other"; do
    local -a these=("${isas[@]}")
    [ "$build" = "$main" ] || these=("${other_isas[@]}")
    for isa in "${these[@]}"; do
      got=$(BITGRAD_ISA=$isa "$build/bin/bitgrad" train "$config" --steps "$steps" --threads 2 --workers 2 \
        --out "$tmp/$label-$(basename "$build")-$isa" --no-progress | awk '/^fingerprint/ {print $2}')
      [ -n "$want" ] || want=$got
      if [ -z "$got" ] || [ "$got" != "$want" ]; then
        echo "crosscheck: $label TRAINING MISMATCH $(basename "$build") isa=$isa: '$got' vs $want"
        fail=1
      fi
    done
  done
  if [ $fail -ne 0 ]; then
    echo "crosscheck: FAILED: builds or code paths train the $label differently (contract T8)"
    exit 1
  fi
  echo "crosscheck: $steps $label training steps identical for gcc -O3 on ${isas[*]} and clang -O0 on ${other_isas[*]}: $want ($((SECONDS - start)) s)"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The whole training stack: the Fashion-MNIST MLP (data loading with workers, forward,
# backward, optimizer, checkpoint), the CNN, and a transformer: the fortunes GPT (text windows,
# attention, layer norm over tokens, GELU, AdamW with clipping).
train_everywhere examples/fashion_mlp.toml 10 MLP
# the convolutions (blocks of samples, im2col / im2row / col2im, pooling) of the LeNet-like CNN
train_everywhere examples/fashion_cnn.toml 4 CNN
# two steps: a forward and backward at the initial weights, AdamW's update, and a forward and backward
# at the updated ones (at Clang -O0 the scalar path's GPT step takes 20 s on a Zen 3)
train_everywhere examples/fortunes_gpt.toml 2 GPT
# Mixed precision: the GPT in bf16 with stochastic rounding and in fp16 with dynamic loss scaling
# (the 16-bit rounding's fast paths are plain C++: the same bits from both compilers and -O levels).
# The Clang -O0 build trains them on the widest path only: its kernels' other paths were compared
# in f32 above, and the rounding code is the same on every path.
sed -e 's/^clip_grad_norm = 1.0$/clip_grad_norm = 1.0\nprecision = "bf16"\nrounding = "stochastic"/' examples/fortunes_gpt.toml > "$tmp/gpt_bf16.toml"
sed -e 's/^clip_grad_norm = 1.0$/clip_grad_norm = 1.0\nprecision = "fp16"/' examples/fortunes_gpt.toml > "$tmp/gpt_fp16.toml"
grep -q 'precision = "bf16"' "$tmp/gpt_bf16.toml" || { echo "crosscheck: could not make the bf16 configuration"; exit 1; }
widest=${isas[${#isas[@]}-1]}
train_everywhere "$tmp/gpt_bf16.toml" 2 GPT-bf16 "$widest"
train_everywhere "$tmp/gpt_fp16.toml" 2 GPT-fp16 "$widest"
