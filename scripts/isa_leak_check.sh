#!/usr/bin/env bash
# ISA leak check (docs/numerics.md §1, src/math/isa_targets.hpp): no function outside a code
# path's namespace may hold an instruction wider than baseline x86-64 (SSE2). A template or
# inline function compiled for AVX2 or AVX-512 in a code-path file, if the linker kept that copy,
# would make every caller die with SIGILL on a CPU without the ISA.
# Wider means: a VEX or EVEX encoded instruction (mnemonic v*, BMI's andn/shlx/..., popcnt), or
# a ymm, zmm or mask register. Allowed to hold them: functions whose (demangled) name mentions a
# code path's namespace (kern::avx2::, kern::avx512::, io::xxh_avx2::, io::xxh_avx512::; a template
# instance of an ISA type can only be reached from that ISA) and the local (static) XXH*
# functions of the hash's code-path files.
# Usage: scripts/isa_leak_check.sh FILE...   (executables, shared libraries, objects); exit 1 on a leak.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 FILE..." >&2; exit 2; }
status=0
for f in "$@"; do
  [ -f "$f" ] || { echo "isa-leak: $f: no such file" >&2; exit 2; }
  case $(uname -m) in x86_64) ;; *) echo "isa-leak: $f: not x86-64, nothing to check"; continue ;; esac
  # local function symbols (binding l, type F): the only XXH* names that may hold wider code
  locals=$(mktemp)
  objdump -t "$f" | awk '$2 == "l" && $3 == "F" && $NF ~ /^XXH/ {print $NF}' | sort -u >"$locals"
  out=$(objdump -d --no-show-raw-insn -C -w "$f" | awk -v locals="$locals" '
    BEGIN { while ((getline l < locals) > 0) local_xxh[l] = 1 }
    /^[0-9a-f]+ <.*>:$/ {
      fn = substr($0, index($0, "<") + 1); fn = substr(fn, 1, length(fn) - 2)
      base = fn; sub(/\.(cold|isra|constprop|part|lto_priv)[.0-9]*$/, "", base); sub(/ \[clone .*$/, "", base)
      allowed = (fn ~ /kern::avx2::|kern::avx512::|io::xxh_avx2::|io::xxh_avx512::/) || (fn in local_xxh) || (base in local_xxh)
      next
    }
    /^ +[0-9a-f]+:\t/ {
      if (allowed || fn == "") next
      split($0, parts, "\t"); ins = parts[2]; mnem = ins; sub(/[ \t].*$/, "", mnem)
      if (mnem ~ /^(rep|repz|repnz|lock|notrack|bnd|data16|addr32|cs|ds)$/) { rest = ins; sub(/^[^ ]+ +/, "", rest); mnem = rest; sub(/[ \t].*$/, "", mnem) }
      wide = (mnem ~ /^v/ && mnem !~ /^verr|^verw/) || mnem ~ /^k(add|and|andn|mov|not|or|ortest|shiftl|shiftr|test|unpck|xnor|xor)[bwdq]$/ ||
             mnem ~ /^(andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|popcnt)$/ || ins ~ /%[yz]mm[0-9]|%k[0-7]\>/
      if (wide && !(fn in seen)) { seen[fn] = 1; n++; if (n <= 20) printf "  %s: %s\n", fn, ins }
    }
    END { if (n > 20) printf "  ... %d functions in all\n", n; exit(n > 0) }') || {
    echo "isa-leak: $f: functions outside the code paths hold AVX2/AVX-512 instructions:"
    echo "$out"
    status=1
  }
  rm -f "$locals"
  [ $status -ne 0 ] || echo "isa-leak: $f: no wider instruction outside the code paths"
done
exit $status
