#!/bin/bash
# The cost of recording a PyTorch training with bitgrad.torch (docs/torch.md), two ways:
#  - ROUNDS rounds of bench/torch_record_step.py (MODEL mlp or cnn, THREADS torch threads,
#    default 1) plain, recorded (inline hashing, the default), with --hashing thread and with
#    --every 10, in turn, as separate processes; prints each run's steps/s, then the medians;
#  - per round, one recorded run that switches the recording off and on every 10 steps
#    (PAIRED=10, 1,600 timed steps): the median of recorded / plain time over neighbouring
#    segments, which a shared host's slow swings touch alike.
# Needs the bitgrad module on PYTHONPATH (e.g. PYTHONPATH=build/python) and Debian's torch for
# /usr/bin/python3.
#   bash bench/torch_record.sh [ROUNDS [MODEL]]
set -eu
rounds=${1:-5}
model=${2:-mlp}
bench=$(cd "$(dirname "$0")" && pwd)/torch_record_step.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
: > "$out/rates"
: > "$out/paired"
for r in $(seq "$rounds"); do
  echo "plain $(/usr/bin/python3 "$bench" "$model" | awk '{print $2}')" >> "$out/rates"
  for opts in "" "--hashing thread" "--every 10"; do
    rm -rf "$out/run"
    rate=$(/usr/bin/python3 -m bitgrad.torch.record --out "$out/run" $opts -- "$bench" "$model" 2>/dev/null | awk '/^steps/ {print $2}')
    echo "recorded${opts:+ $opts} $rate" >> "$out/rates"
  done
  rm -rf "$out/run"
  PAIRED=10 /usr/bin/python3 -m bitgrad.torch.record --out "$out/run" -- "$bench" "$model" 1620 2>/dev/null \
    | awk '/^paired/ {print $3}' >> "$out/paired"
done
cat "$out/rates"
echo "paired recorded/plain: $(tr '\n' ' ' < "$out/paired")"
/usr/bin/python3 - "$out/rates" "$out/paired" <<'PY'
import collections, statistics, sys
rates = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, rate = line.rsplit(" ", 1)
    rates[name].append(float(rate))
plain = statistics.median(rates["plain"])
for name, v in rates.items():
    m = statistics.median(v)
    print("%-28s %7.1f steps/s  %+.0f%% (time %+.0f%%)" % (name, m, 100 * (m / plain - 1), 100 * (plain / m - 1)))
paired = [float(x) for x in open(sys.argv[2])]
print("paired, recorded (inline)    time %+.0f%% (median of %d runs' medians)" % (100 * (statistics.median(paired) - 1), len(paired)))
PY
