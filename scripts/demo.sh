#!/usr/bin/env bash
# The main job until the training issue lands: the selftest (forward and backward of a fixed
# MLP) on 1 and 2 threads and on every code path of this CPU; all fingerprints must agree.
set -euo pipefail
bin=${1:-build}/bin/bitgrad
"$bin" --version
first=$("$bin" selftest --threads 1 --isa scalar)
echo "$first" | sed -n 's/^model /selftest: /p'
want=$(echo "$first" | awk '/^fingerprint/ {print $2}')
isas=(scalar)
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && isas+=(avx2)
grep -qw avx512f /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && isas+=(avx512)
same=1
for t in 1 2; do
  for isa in "${isas[@]}"; do
    out=$("$bin" selftest --threads "$t" --isa "$isa")
    loss=$(echo "$out" | awk '/^loss/ {print $2}')
    fp=$(echo "$out" | awk '/^fingerprint/ {print $2}')
    printf '  threads %d  %-7s  loss %s  fingerprint %s\n' "$t" "$isa" "$loss" "$fp"
    [ "$fp" = "$want" ] || same=0
  done
done
if [ $same -eq 1 ]; then
  echo "identical gradients on every thread count and code path"
else
  echo "FINGERPRINTS DIFFER: the reproducibility contract is broken" >&2
  exit 1
fi
