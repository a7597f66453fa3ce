#!/usr/bin/env bash
# The GPT peer benchmark of docs/benchmarks.md (make bench-gpt): bitgrad's character-level GPT
# (examples/fortunes_gpt.toml) against the same model in PyTorch (Debian's python3-torch,
# /usr/bin/python3), trained from the same initial parameters on the same batches with the same
# learning rates.
#   1. curve: build/bin/gpt_export trains GPT_STEPS steps at GPT_CURVE_THREADS (2) threads and
#      writes the initial parameters, every step's batch and learning rate and the validation
#      windows (RESULTS/export), with bitgrad's validation loss at step 0, every 250 steps and
#      every GPT_DENSE (25) steps up to 200; bench/gpt_peer.py trains PyTorch on them
#      (GPT_TORCH_CURVE set-up, default torch-openblas at 1 thread) and evaluates at the same
#      steps
#   2. timing: GPT_TIME_STEPS (200) steps of bitgrad (--time-only) and of each PyTorch set-up of
#      GPT_TORCH_SETUPS (bench/torch_setups.sh), at 1 and 2 threads (GPT_THREADS), GPT_REPS (5)
#      rounds, the order rotating every round
#      (the first GPT_WARMUP steps of a run are left out of its median: default min(10, steps/10));
#      each ratio gets its median, best and spread over the rounds and a verdict against
#      GPT_TARGET (default 0.75) — bench/benchlib.py
# Usage: bench/gpt_peer.sh BUILD_DIR [RESULTS_DIR]   (default BUILD_DIR/bench-results-gpt);
# GPT_ONLY=curve or timing runs one part (timing needs RESULTS_DIR/export from a curve run);
# GPT_ONLY=export,timing writes the export without PyTorch's curve run (a timing-only run:
# GPT_STEPS = GPT_TIME_STEPS is enough). GPT_CONFIG picks the model (examples/fortunes_gpt.toml;
# examples/fortunes_gpt_large.toml is nanoGPT's shakespeare-char size, seconds per step on 2
# cores: keep GPT_TIME_STEPS small).
# bench/gpt_peer.py --report RESULTS_DIR prints the tables and writes RESULTS_DIR/gpt_peer.json.
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench-results-gpt}
config=${GPT_CONFIG:-examples/fortunes_gpt.toml}
steps=${GPT_STEPS:-2000}
dense=${GPT_DENSE:-25}
curve_threads=${GPT_CURVE_THREADS:-2}
torch_curve=${GPT_TORCH_CURVE:-torch-openblas:1}
time_steps=${GPT_TIME_STEPS:-200}
reps=${GPT_REPS:-5}
warmup=${GPT_WARMUP:-}
target=${GPT_TARGET:-0.75}
setups=${GPT_TORCH_SETUPS:-torch-openblas torch-blis-skx}
only=${GPT_ONLY:-curve,timing}
want() { [[ ",$only," == *",$1,"* ]]; }
here=$(dirname "$0")
source "$here/torch_setups.sh"
peer_py="$here/gpt_peer.py"  # run_torch runs this instead of peer_torch.py
[ -d "$blis_dir" ] || { echo "gpt_peer: $blis_dir missing (scripts/install-deps.sh installs libblis-openmp-dev); PyTorch with BLIS is left out" >&2; setups=$(tr ' ' '\n' <<<"$setups" | grep -v blis | tr '\n' ' '); }
setups=$(runnable_setups $setups)
[ "$time_steps" -le "$steps" ] || time_steps=$steps
mkdir -p "$out"
{ lscpu | grep -E '^(Model name|CPU family|Model|CPU\(s\)):'; uptime; } >"$out/machine.txt"
/usr/bin/python3 "$here/benchlib.py" machine "$out/machine.json" start "$build"
warm_args=()
[ -n "$warmup" ] && warm_args=(--warmup "$warmup")

if want curve || want export; then
  rm -rf "$out/export" "$out/torch-curve.json"
  "$build/bin/gpt_export" --config "$config" --out "$out/export" --steps "$steps" --threads "$curve_threads" \
    --eval-every 250 --dense-every "$dense" --dense-until 200 "${warm_args[@]}" 2>"$out/export.log"
fi
if want curve; then
  IFS=: read -r setup t <<<"$torch_curve"
  run_torch "$setup" "$t" --data "$out/export" --out "$out/torch-curve.json" "${warm_args[@]}" 2>"$out/torch-curve.log"
fi

if want timing; then
  # the step's multiply-adds, for its FMA-bound limit (bench/benchlib.py: fma_limit_ms)
  "$build/bin/step_bench" --config "$config" --steps 1 --trace none >"$out/count.json"
  rm -rf "$out/time"
  mkdir -p "$out/time"
  runs=()
  for t in ${GPT_THREADS:-1 2}; do
    runs+=("bitgrad:$t")
    for s in $setups; do runs+=("$s:$t"); done
  done
  n=${#runs[@]}
  for r in $(seq 1 "$reps"); do
    for k in $(seq 0 $((n - 1))); do
      IFS=: read -r who t <<<"${runs[$(((k + r) % n))]}"
      dst="$out/time/$who-t$t-r$r.json"
      if [ "$who" = bitgrad ]; then
        "$build/bin/gpt_export" --config "$config" --out "$out/time/bitgrad-t$t-r$r" --steps "$time_steps" --threads "$t" --time-only "${warm_args[@]}"
        mv "$out/time/bitgrad-t$t-r$r/bitgrad.json" "$dst"
        rmdir "$out/time/bitgrad-t$t-r$r"
      else
        run_torch "$who" "$t" --data "$out/export" --steps "$time_steps" --time-only --out "$dst" "${warm_args[@]}"
      fi
    done
    echo "gpt_peer: timing round $r of $reps done" >&2
  done
fi
uptime >>"$out/machine.txt"
/usr/bin/python3 "$here/benchlib.py" machine "$out/machine.json" end
/usr/bin/python3 "$peer_py" --report "$out" --target "$target"
