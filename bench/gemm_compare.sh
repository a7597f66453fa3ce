#!/bin/bash
# Two or more gemm_bench binaries (e.g. built at two commits) on the same shapes, interleaved:
# in each of ROUNDS rounds every binary runs REPS repetitions of 50 ms per shape, in turn; the
# table gives each binary's best GFLOP/s per shape over all rounds (on a shared machine the best
# run is the one least disturbed by others; medians move with the neighbours' load).
#   bench/gemm_compare.sh FILTER THREADS ROUNDS BIN...   (REPS=6 by default)
# e.g. bench/gemm_compare.sh 'fwd_128x512|dgrad_128' 1 8 /tmp/before/gemm_bench build/bin/gemm_bench
set -eu
filter=$1 threads=$2 rounds=$3
shift 3
reps=${REPS:-6}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    BENCH_LIB=bitgrad BENCH_THREADS=$threads "$bin" --benchmark_filter="$filter" --benchmark_min_time=0.05 \
      --benchmark_repetitions="$reps" --benchmark_format=json 2>/dev/null > "$out/$i-$r.json"
  done
done
/usr/bin/python3 - "$out" "$@" <<'PY'
import collections, glob, json, sys
out, bins = sys.argv[1], sys.argv[2:]
best = [collections.defaultdict(float) for _ in bins]
for i in range(len(bins)):
    for fn in glob.glob(f"{out}/{i + 1}-*.json"):
        for b in json.load(open(fn))["benchmarks"]:
            if b.get("run_type") == "iteration":
                shape = b["name"].split("/")[1]
                best[i][shape] = max(best[i][shape], b["GFLOPS"] / 1e9)
shapes = sorted(set().union(*best))
print("| shape | " + " | ".join(bins) + " |")
print("|---|" + "---|" * len(bins))
for s in shapes:
    print(f"| {s} | " + " | ".join(f"{b[s]:.1f}" if s in b else "—" for b in best) + " |")
PY
