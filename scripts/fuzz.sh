#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz: RUNS executions each, or SECONDS each when > 0.
# The working corpus grows in BUILD/corpus/<target> from the seeds in tests/fuzz/corpus and the
# past findings in tests/fuzz/regressions; a crash, a leak, a timeout or a sanitizer report
# leaves its input in BUILD/findings/<target>/ and fails the run.
# Usage: scripts/fuzz.sh BUILD RUNS SECONDS   (FUZZ_TARGETS="idx config" for some of them)
set -euo pipefail
build=$1 runs=$2 seconds=$3
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for t in ${FUZZ_TARGETS:-safetensors idx config csv records onnx serve_request http_head onnx_model}; do
  mkdir -p "$build/corpus/$t" "$build/findings/$t"
  limit=(-runs="$runs")
  [ "$seconds" -gt 0 ] && limit=(-max_total_time="$seconds")
  log="$build/findings/$t.log"
  if "$build/bin/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/findings/$t/" "$build/corpus/$t" "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t" \
       >"$log" 2>&1; then
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz $t: $execs executions, $cov, corpus $(ls "$build/corpus/$t" | wc -l) inputs, no finding"
  else
    echo "fuzz $t: FINDING (see $log and $build/findings/$t/)"
    tail -30 "$log"
    status=1
  fi
done
exit $status
