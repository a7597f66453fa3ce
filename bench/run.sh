#!/usr/bin/env bash
# Runs the benchmarks of docs/benchmarks.md and prints their tables of medians:
#   1. FMA peak; GEMM of bitgrad, OpenBLAS and BLIS in rotating processes (BENCH_REPS rounds,
#      1 and 2 threads)
#   2. kernels beside plain loops (bench/kernel_bench.cpp)
#   3. the cost of the step trace (bench/trace_bench.cpp)
#   4. the determinism tax: canonical kernels against OpenBLAS/BLIS in one process
#      (bench/tax_bench.cpp, BENCH_REPS rounds)
#   5. the peer benchmark against PyTorch (bench/peer.sh, PEER_REPS rounds)
#   6. scaling with batch and width (bench/scaling.sh), also as a page of `bitgrad report`
# Usage: bench/run.sh [BUILD_DIR]   (make bench; BENCH_ONLY=gemm,kernels,trace,tax,peer,scaling
# runs a subset). Results land in BUILD_DIR/bench-results.
set -euo pipefail
build=${1:-build}
reps=${BENCH_REPS:-5}
out="$build/bench-results"
only=${BENCH_ONLY:-gemm,kernels,trace,tax,peer,scaling}
want() { [[ ",$only," == *",$1,"* ]]; }
here=$(dirname "$0")
source "$here/torch_setups.sh"
rm -rf "$out"
mkdir -p "$out"
"$build/bin/bitgrad" env >"$out/env.json"
# the CPU (vendor, family, model) and the load average at the start; every report prints them with
# the load average at its own end (bench/benchlib.py)
/usr/bin/python3 "$here/benchlib.py" machine "$out/machine.json" start "$build"
if want gemm; then
"$build/bin/fma_peak" --benchmark_format=json >"$out/peak.json" 2>/dev/null
for r in $(seq 1 "$reps"); do
  for t in 1 2; do
    # rotate which library goes first in each round; BLIS with its AVX-512 kernels forced
    # (BLIS_ARCH_TYPE=0: BLIS 0.9 picks its generic kernels on Zen 5) where the CPU has AVX-512
    # (bench/torch_setups.sh: blis_skx_env)
    case $((r % 3)) in 1) libs="bitgrad openblas blis" ;; 2) libs="openblas blis bitgrad" ;; *) libs="blis bitgrad openblas" ;; esac
    for lib in $libs; do
      env BENCH_LIB=$lib BENCH_THREADS=$t OPENBLAS_NUM_THREADS=$t BLIS_NUM_THREADS=$t OMP_NUM_THREADS=$t $(blis_skx_env) \
        "$build/bin/gemm_bench" --benchmark_format=json >"$out/gemm-$lib-t$t-r$r.json" 2>/dev/null
    done
  done
  echo "bench: round $r of $reps done" >&2
done
/usr/bin/python3 "$here/report_gemm.py" "$out"
fi
if want kernels; then
  echo
  "$build/bin/kernel_bench" --benchmark_format=json >"$out/kernels.json" 2>/dev/null
  /usr/bin/python3 "$here/report_kernels.py" "$out/kernels.json"
fi
if want trace; then
# the step trace: traced and untraced sessions interleaved in one process (bench/trace_bench.cpp)
for r in $(seq 1 "$reps"); do
  for t in 1 2; do
    "$build/bin/trace_bench" --threads "$t" >>"$out/trace.txt"
  done
done
echo
/usr/bin/python3 "$here/report_trace.py" "$out/trace.txt"
fi
if want tax; then
# OpenMP's threads (BLIS) sleep when idle instead of spinning against bitgrad's pool
for r in $(seq 1 "$reps"); do
  for t in 1 2; do
    for model in mlp cnn; do
      for blas in openblas blis; do
        # BLIS's OpenMP teams inside bitgrad's pool threads (the convolutions call the GEMM per
        # block of samples from each thread) oversubscribe the cores by orders of magnitude
        [ "$t" -gt 1 ] && [ "$blas" = blis ] && continue
        env OMP_WAIT_POLICY=PASSIVE $(blis_skx_env) "$build/bin/tax_bench" --config "examples/fashion_$model.toml" --threads "$t" \
          --steps "${TAX_STEPS:-200}" --blas "$blas" >>"$out/tax.jsonl"
      done
    done
  done
done
echo
/usr/bin/python3 "$here/report_tax.py" "$out/tax.jsonl"
fi
if want peer; then
  echo
  PEER_REPS=${PEER_REPS:-$reps} bash "$here/peer.sh" "$build" "$out"
  /usr/bin/python3 "$here/report_peer.py" "$out" peer
fi
if want scaling; then
  echo
  # PyTorch in its fastest set-up of the peer run (OpenBLAS where there was none)
  if [ -s "$out/peer.jsonl" ]; then read -r s1 s2 < <(/usr/bin/python3 "$here/report_peer.py" "$out" best); else s1=torch-openblas s2=torch-openblas; fi
  bash "$here/scaling.sh" "$build" "$out" "$s1" "$s2"
  /usr/bin/python3 "$here/report_peer.py" "$out" scaling
  "$build/bin/bitgrad" report "$out/scaling" -o "$out/scaling.html" >/dev/null
  echo "scaling plot: $out/scaling.html"
fi
