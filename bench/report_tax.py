#!/usr/bin/python3
"""Summarises bench/tax_bench runs (one JSON line each, from bench/run.sh) as the determinism
tax table of docs/benchmarks.md: per model, thread count and BLAS, the median over rounds of the
canonical and free ms/step and of their ratio (the tax)."""
import json
import statistics
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    rows.setdefault((d["config"].replace(".toml", ""), d["threads"], d["blas"]), []).append(d)

print(benchlib.machine_line(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "machine.json")) + "\n")
print("| model | threads | free GEMM | rounds | canonical ms/step | free ms/step | tax (median) | tax (range) | goal |")
print("|---|---|---|---|---|---|---|---|---|")
for (cfg, t, blas), v in sorted(rows.items()):
    c = statistics.median(x["canonical_ms"] for x in v)
    f = statistics.median(x["free_ms"] for x in v)
    tax = [x["tax"] for x in v]
    m = statistics.median(tax)
    print(f"| {cfg} | {t} | {blas} | {len(v)} | {c:.3f} | {f:.3f} | {m:.3f} | {min(tax):.3f} … {max(tax):.3f} | ≤ 1.02: {'met' if m <= 1.02 else ('within noise' if min(tax) <= 1.02 else 'missed')} |")
