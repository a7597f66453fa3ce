#!/usr/bin/env bash
# The data-parallel benchmarks of docs/distributed_bench.md (make bench-dist):
#   1. combine: dist_combine_bench under mpirun for each P in DIST_RANKS: tree_allreduce beside
#      MPI_Allreduce on the MLP's gradient (669,706 floats) and a GPT-sized one (10,745,088),
#      DIST_COMBINE_REPS interleaved repetitions each
#   2. train: the Fashion-MNIST MLP, DIST_STEPS steps, in one process (--threads 1 and 2) and
#      under `mpirun -n P` (--threads 1) for each P in DIST_RANKS, with the step trace on
#      (default) and off (--trace none); DIST_TRAIN_REPS rounds, the order of the set-ups
#      rotating each round; wall time of the whole command, samples/s and fingerprint from its
#      output
# Usage: bench/dist.sh [BUILD_DIR]; DIST_ONLY=combine or train runs one part. Results land in
# BUILD_DIR/bench-results-dist; bench/report_dist.py prints the tables.
set -euo pipefail
build=${1:-build}
ranks=${DIST_RANKS:-2 4}
combine_reps=${DIST_COMBINE_REPS:-30}
train_reps=${DIST_TRAIN_REPS:-5}
steps=${DIST_STEPS:-200}
config=${DIST_CONFIG:-examples/fashion_mlp.toml}
only=${DIST_ONLY:-combine,train}
want() { [[ ",$only," == *",$1,"* ]]; }
here=$(dirname "$0")
out="$build/bench-results-dist"
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none)
rm -rf "$out"
mkdir -p "$out"
{ lscpu | grep -E '^(Model name|CPU family|Model|CPU\(s\)):' ; uptime; } >"$out/machine.txt"

if want combine; then
  for p in $ranks; do
    "${mpirun[@]}" -n "$p" "$build/bin/dist_combine_bench" --reps "$combine_reps" >>"$out/combine.jsonl" 2>>"$out/combine.log"
    echo "bench-dist: combine, $p ranks done" >&2
  done
fi

if want train; then
  # set-up name | command prefix | threads
  setups=("p1-t1||1" "p1-t2||2")
  for p in $ranks; do setups+=("p$p-t1|${mpirun[*]} -n $p|1"); done
  n=${#setups[@]}
  for r in $(seq 1 "$train_reps"); do
    for i in $(seq 0 $((n - 1))); do
      s=${setups[$(((i + r) % n))]}
      IFS='|' read -r name prefix threads <<<"$s"
      for trace in steps none; do
        dir="$out/runs/$name-$trace-r$r"
        log="$out/logs/$name-$trace-r$r.txt"
        mkdir -p "$out/logs"
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        $prefix "$build/bin/bitgrad" train "$config" --threads "$threads" --steps "$steps" --no-progress --trace "$trace" --out "$dir" >"$log" 2>&1
        t1=$(date +%s.%N)
        sps=$(grep -E '^step [0-9]+/[0-9]+ ' "$log" | tail -1 | sed -E 's/.* ([0-9]+) samples\/s$/\1/')
        trained=$(grep -E '^trained ' "$log" | sed -E 's/^trained [0-9]+ steps in ([0-9.]+) s.*/\1/')
        fp=$(grep -E '^fingerprint ' "$log" | awk '{print $2}')
        printf '{"setup": "%s", "trace": "%s", "round": %d, "wall_s": %.3f, "train_s": %s, "samples_per_s": %s, "fingerprint": "%s"}\n' \
          "$name" "$trace" "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "${trained:-null}" "${sps:-null}" "$fp" >>"$out/train.jsonl"
        rm -rf "$dir"
      done
    done
    echo "bench-dist: train, round $r of $train_reps done" >&2
  done
fi
uptime >>"$out/machine.txt"
/usr/bin/python3 "$here/report_dist.py" "$out"
