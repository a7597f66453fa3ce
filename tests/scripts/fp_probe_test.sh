#!/usr/bin/env bash
# The configure step refuses a compiler command that changes floating-point results, however the
# flags come (cmake/NoFastMath.cmake): the probe (cmake/fp_probe.cpp) passes with the project's
# flags and fails under each value-changing option; a configure with the flags in CXX fails naming
# the flag, and one through a wrapper script that adds them (which no flag list sees) fails naming
# what the probe found.
# Usage: tests/scripts/fp_probe_test.sh CXX SOURCE_DIR
set -euo pipefail
cxx=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=(-O3 -ffp-contract=off -fno-math-errno)
"$cxx" "${base[@]}" "$src/cmake/fp_probe.cpp" -o "$tmp/probe"
"$tmp/probe" || { echo "FAIL: the probe fails with the project's own flags"; exit 1; }
for flags in "-ffast-math" "-Ofast" "-ffinite-math-only" "-fno-signed-zeros" "-freciprocal-math" "-funsafe-math-optimizations" \
             "-ffp-contract=fast -mfma"; do
  # shellcheck disable=SC2086
  "$cxx" "${base[@]}" $flags "$src/cmake/fp_probe.cpp" -o "$tmp/probe" 2>/dev/null
  if out=$("$tmp/probe"); then
    echo "FAIL: the probe passes under $flags"
    exit 1
  fi
  echo "probe under $flags: $out"
done
configure() {  # CXX value, then what the error must name
  local dir="$tmp/build$RANDOM"
  if out=$(CXX="$1" cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBITGRAD_BUILD_TESTS=OFF -DBITGRAD_BUILD_BENCH=OFF \
             -DBITGRAD_BUILD_TOOLS=OFF -DBITGRAD_BUILD_EXAMPLES=OFF -DBITGRAD_BUILD_PYTHON=OFF 2>&1); then
    echo "FAIL: configure with CXX='$1' succeeded"
    exit 1
  fi
  grep -q -- "$2" <<<"$(tr '\n' ' ' <<<"$out" | tr -s ' ')" || { echo "FAIL: configure with CXX='$1' did not name '$2':"; echo "$out"; exit 1; }
  echo "configure with CXX='$1': refused, naming '$2'"
}
configure "$cxx -fassociative-math -ffinite-math-only" "-fassociative-math"
printf '#!/bin/sh\nexec %s -ffinite-math-only "$@"\n' "$cxx" >"$tmp/fastcxx"
chmod +x "$tmp/fastcxx"
configure "$tmp/fastcxx" "finite math: NaN compared equal to itself"
echo "ok"
