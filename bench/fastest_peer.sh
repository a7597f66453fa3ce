#!/usr/bin/env bash
# Speed, round three (docs/benchmarks.md "Speed, round three"): bitgrad's best set-up
# against PyTorch's fastest on the MLP, the CNN and the fortunes GPT, at 1 and 2 threads, the
# set-ups interleaved (the order rotating) in FASTEST_REPS (5) rounds, each ratio with its median,
# its best and its spread, every goal marked met / within noise / missed (bench/benchlib.py).
#   bench/fastest_peer.sh [BUILD_DIR] [OUT_DIR]   (make bench-fastest; OUT_DIR default BUILD_DIR/bench-fastest)
# Bounded: an estimated 10 minutes on a quiet 2-core machine (22 minutes for the MLP and CNN part
# alone on a loaded one):
#   MLP and CNN: FASTEST_STEPS (150) timed steps a process after 10 warm-up steps; PyTorch with
#                OpenBLAS, BLIS (its own kernel choice) and BLIS with its AVX-512 kernels forced
#   GPT (examples/fortunes_gpt.toml): FASTEST_GPT_STEPS (30) timed steps after 5; PyTorch with
#                OpenBLAS and BLIS
#   FASTEST_LARGE=1 adds examples/fortunes_gpt_large.toml (nanoGPT's shakespeare-char size):
#                FASTEST_LARGE_STEPS (2) timed steps after 1 (the export: FASTEST_LARGE_STEPS + 1 steps at 2 threads), FASTEST_LARGE_REPS (5) rounds,
#                PyTorch with OpenBLAS and BLIS; seconds a step: an estimated 25 more minutes on 2 cores
# FASTEST_EXPORT_THREADS (2): the threads of the GPT exports (the batches do not depend on them).
# FASTEST_ONLY=peer,gpt,large picks parts; FASTEST_THREADS ("1 2") the thread counts (on a loaded
# machine the 2-thread runs measure the other jobs, not the set-ups). The tables: bench/report_fastest_peer.py OUT_DIR.
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench-fastest}
reps=${FASTEST_REPS:-5}
only=${FASTEST_ONLY:-peer,gpt,large}
want() { [[ ",$only," == *",$1,"* ]]; }
here=$(dirname "$0")
rm -rf "$out"
mkdir -p "$out"
"$build/bin/bitgrad" env >"$out/env.json"
/usr/bin/python3 "$here/benchlib.py" machine "$out/machine.json" start "$build"
start=$(date +%s)
if want peer; then
  PEER_THREADS=${FASTEST_THREADS:-1 2} PEER_REPS=$reps PEER_MODELS="mlp cnn" PEER_STEPS=${FASTEST_STEPS:-150} \
    PEER_SETUPS="bitgrad torch-openblas torch-blis torch-blis-skx" bash "$here/peer.sh" "$build" "$out/peer"
fi
if want gpt; then
  n=${FASTEST_GPT_STEPS:-30}
  GPT_THREADS=${FASTEST_THREADS:-1 2} GPT_CONFIG=examples/fortunes_gpt.toml GPT_CURVE_THREADS=${FASTEST_EXPORT_THREADS:-2} GPT_ONLY=export,timing GPT_STEPS=$((n + 5)) GPT_TIME_STEPS=$((n + 5)) GPT_WARMUP=5 \
    GPT_REPS=$reps GPT_TORCH_SETUPS="torch-openblas torch-blis" GPT_TARGET=0.75 \
    bash "$here/gpt_peer.sh" "$build" "$out/gpt" >"$out/gpt.txt"
fi
if want large && [ "${FASTEST_LARGE:-0}" = 1 ]; then
  n=${FASTEST_LARGE_STEPS:-2}
  GPT_THREADS=${FASTEST_THREADS:-1 2} GPT_CONFIG=examples/fortunes_gpt_large.toml GPT_CURVE_THREADS=${FASTEST_EXPORT_THREADS:-2} GPT_ONLY=export,timing GPT_STEPS=$((n + 1)) GPT_TIME_STEPS=$((n + 1)) GPT_WARMUP=1 \
    GPT_REPS=${FASTEST_LARGE_REPS:-$reps} GPT_TORCH_SETUPS="torch-openblas torch-blis" GPT_TARGET=0.8 \
    bash "$here/gpt_peer.sh" "$build" "$out/gpt_large" >"$out/gpt_large.txt"
fi
/usr/bin/python3 "$here/benchlib.py" machine "$out/machine.json" end
echo "fastest_peer: $(( $(date +%s) - start )) s" | tee "$out/time.txt" >&2
/usr/bin/python3 "$here/report_fastest_peer.py" "$out"
