#!/bin/bash
# The cost of recording a PyTorch training with bitgrad.torch (docs/torch.md): ROUNDS rounds of
# bench/torch_record_step.py (MODEL mlp or cnn, THREADS torch threads, default 1) plain,
# recorded, recorded with --hashing inline and with --every 10, in turn; prints each run's
# steps/s, then the medians. Needs the bitgrad module on PYTHONPATH (e.g. PYTHONPATH=build/python)
# and Debian's torch for /usr/bin/python3.
#   bash bench/torch_record.sh [ROUNDS [MODEL]]
set -eu
rounds=${1:-5}
model=${2:-mlp}
bench=$(cd "$(dirname "$0")" && pwd)/torch_record_step.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
: > "$out/rates"
for r in $(seq "$rounds"); do
  echo "plain $(/usr/bin/python3 "$bench" "$model" | awk '{print $2}')" >> "$out/rates"
  for opts in "" "--hashing inline" "--every 10"; do
    rm -rf "$out/run"
    rate=$(/usr/bin/python3 -m bitgrad.torch.record --out "$out/run" $opts -- "$bench" "$model" 2>/dev/null | awk '{print $2}')
    echo "recorded${opts:+ $opts} $rate" >> "$out/rates"
  done
done
cat "$out/rates"
/usr/bin/python3 - "$out/rates" <<'PY'
import collections, statistics, sys
rates = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, rate = line.rsplit(" ", 1)
    rates[name].append(float(rate))
plain = statistics.median(rates["plain"])
for name, v in rates.items():
    m = statistics.median(v)
    print("%-28s %7.1f steps/s  %+.0f%%" % (name, m, 100 * (m / plain - 1)))
PY
