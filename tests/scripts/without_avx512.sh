#!/usr/bin/env bash
# Runs a command with AVX-512 hidden from bitgrad (BITGRAD_HIDE_ISA=avx512, numerics.md §1), so
# that on an AVX-512 machine the kernel and contract tests also run as on a CPU without it (AVX2
# and the scalar reference only): an assumption that the widest path exists fails everywhere, not
# only on the CPU that lacks it. On a CPU without AVX-512 the suites already ran so: skipped (77).
# Usage: tests/scripts/without_avx512.sh COMMAND [ARGS...]
set -euo pipefail
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "this CPU has no AVX-512 to hide: the same suites already ran without it"
  exit 77
fi
BITGRAD_HIDE_ISA=avx512 exec "$@"
