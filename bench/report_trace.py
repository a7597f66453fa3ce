#!/usr/bin/python3
"""Summarises bench/trace_bench runs (one line each, from bench/run.sh) as the table of
docs/benchmarks.md: per thread count, the median over rounds of the untraced and traced
ms/step and of the overhead."""
import re
import statistics
import sys

rows = {}
line_re = re.compile(r"threads (\d+)\s+isa (\S+)\s+tracer (\S+)\s+(\d+) steps each: ms/step untraced ([\d.]+), traced ([\d.]+), overhead ([+-][\d.]+)%")
for line in open(sys.argv[1]):
    m = line_re.search(line)
    if not m:
        continue
    t, isa, mode, steps, a, b, o = m.groups()
    rows.setdefault((int(t), isa, mode, steps), []).append((float(a), float(b), float(o)))

print("| threads | tracer mode | rounds | ms/step untraced | ms/step traced | overhead (median) | overhead (range) |")
print("|---|---|---|---|---|---|---|")
for (t, isa, mode, steps), v in sorted(rows.items()):
    a = statistics.median(x[0] for x in v)
    b = statistics.median(x[1] for x in v)
    o = [x[2] for x in v]
    print(f"| {t} | {mode} | {len(v)} | {a:.3f} | {b:.3f} | {statistics.median(o):+.2f}% | {min(o):+.2f}% … {max(o):+.2f}% |")

# the target of issues 5 and 13: the trace costs at most 3% of the step at every thread count
print()
for (t, isa, mode, steps), v in sorted(rows.items()):
    o = statistics.median(x[2] for x in v)
    print(f"- step trace at {t} thread{'s' if t > 1 else ''} ({mode}): {o:+.2f}% (target <= 3%: {'met' if o <= 3 else 'missed'})")
