#!/usr/bin/env bash
# scripts/isa_leak_check.sh must fail on a planted leak and pass without it: a template compiled
# with -mavx2 in one file (the way a code-path file compiled with ISA flags used to leak
# std::vector's members) and linked first, so the linker keeps that copy for the baseline caller;
# then the same program with the file compiled for the baseline.
# Usage: tests/scripts/isa_leak_check_test.sh CXX
set -euo pipefail
cxx=$1
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/isa_leak_check.sh
[ "$(uname -m)" = x86_64 ] || { echo "not x86-64: nothing to plant"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/h.hpp" <<'HPP'
#include <vector>
template <class T> __attribute__((noinline)) void scale(T* p, int n, T s) { for (int i = 0; i < n; ++i) p[i] *= s; }
HPP
cat >"$tmp/isa.cpp" <<'CPP'
#include "h.hpp"
namespace bitgrad::kern::avx2 {  // a code path's own function may hold AVX2; the shared template may not
float from_isa(std::vector<float>& v, float s) { scale(v.data(), static_cast<int>(v.size()), s); return v[3]; }
}
CPP
cat >"$tmp/main.cpp" <<'CPP'
#include "h.hpp"
namespace bitgrad::kern::avx2 { float from_isa(std::vector<float>& v, float s); }
int main(int argc, char**) {
  std::vector<float> v(64, 1.0f);
  scale(v.data(), static_cast<int>(v.size()), static_cast<float>(argc + 1));
  return v[0] == 2.0f ? 0 : static_cast<int>(bitgrad::kern::avx2::from_isa(v, 1.0f));
}
CPP
"$cxx" -std=c++20 -O3 -mavx2 -c "$tmp/isa.cpp" -o "$tmp/isa_avx2.o"
"$cxx" -std=c++20 -O3 -c "$tmp/isa.cpp" -o "$tmp/isa_base.o"
"$cxx" -std=c++20 -O3 -c "$tmp/main.cpp" -o "$tmp/main.o"
"$cxx" "$tmp/isa_avx2.o" "$tmp/main.o" -o "$tmp/leaky"
"$cxx" "$tmp/isa_base.o" "$tmp/main.o" -o "$tmp/clean"
if out=$(bash "$check" "$tmp/leaky"); then
  echo "FAILED: the check passed a binary with a planted AVX2 leak"
  exit 1
fi
echo "$out"
# the shared template is named; the code path's own function is not
echo "$out" | grep -q 'void scale<float>(float\*, int, float)' || { echo "FAILED: the leaked template is not named"; exit 1; }
if echo "$out" | grep -q 'from_isa'; then echo "FAILED: the code path's own function was flagged"; exit 1; fi
bash "$check" "$tmp/clean"
echo "the check caught the planted leak and passed the clean build"
