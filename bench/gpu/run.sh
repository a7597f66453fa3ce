#!/usr/bin/env bash
# Builds and runs the canonical-order GPU probe (docs/gpu.md §9, "Measured on a GPU").
# Not part of the CMake build: it needs nvcc and cuBLAS, and a GPU to run.
#   bash bench/gpu/run.sh            # sm_90 (H100 / H200)
#   ARCH=sm_80 bash bench/gpu/run.sh # another GPU
#   REPS=20 bash bench/gpu/run.sh    # timed runs per measurement (median; default 10)
# Device code: --fmad=false (no contraction of a*b+c: every fma is an explicit __fmaf_rn),
# -ftz=false, -prec-div=true, -prec-sqrt=true (IEEE division, square root and subnormals);
# host code: -ffp-contract=off, as the library's build. No --use_fast_math.
set -euo pipefail
cd "$(dirname "$0")"
ARCH=${ARCH:-sm_90}
BIN=${BIN_DIR:-../../build-gpu}
mkdir -p "$BIN"
nvcc -O3 -arch="$ARCH" --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -std=c++17 \
  -Xcompiler -O3,-march=native,-ffp-contract=off,-Wall,-Wextra \
  -o "$BIN/canonical_gemm" canonical_gemm.cu -lcublas
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv || true
nvcc --version | tail -1
"$BIN/canonical_gemm"
