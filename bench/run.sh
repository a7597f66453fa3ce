#!/usr/bin/env bash
# Runs the benchmarks of docs/benchmarks.md: FMA peak, then GEMM of bitgrad and OpenBLAS in
# alternating processes (A/B, BENCH_REPS rounds, 1 and 2 threads), then the cost of the step
# trace, and prints the tables of medians. Usage: bench/run.sh [BUILD_DIR]   (make bench)
set -euo pipefail
build=${1:-build}
reps=${BENCH_REPS:-5}
out="$build/bench-results"
rm -rf "$out"
mkdir -p "$out"
"$build/bin/fma_peak" --benchmark_format=json >"$out/peak.json" 2>/dev/null
for r in $(seq 1 "$reps"); do
  for t in 1 2; do
    # alternate which library goes first in each round
    if [ $((r % 2)) -eq 1 ]; then libs="bitgrad openblas"; else libs="openblas bitgrad"; fi
    for lib in $libs; do
      BENCH_LIB=$lib BENCH_THREADS=$t OPENBLAS_NUM_THREADS=$t "$build/bin/gemm_bench" --benchmark_format=json \
        >"$out/gemm-$lib-t$t-r$r.json" 2>/dev/null
    done
  done
  echo "bench: round $r of $reps done" >&2
done
/usr/bin/python3 "$(dirname "$0")/report_gemm.py" "$out"
# the step trace: traced and untraced sessions interleaved in one process (bench/trace_bench.cpp)
for r in $(seq 1 "$reps"); do
  for t in 1 2; do
    "$build/bin/trace_bench" --threads "$t" >>"$out/trace.txt"
  done
done
echo
/usr/bin/python3 "$(dirname "$0")/report_trace.py" "$out/trace.txt"
