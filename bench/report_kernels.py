#!/usr/bin/python3
"""The kernel table of docs/benchmarks.md from build/bin/kernel_bench's JSON: each bitgrad
kernel beside the plain loop, with its unit (GB/s read, GFLOP/s, rows/s or elements/s) and the
ratio.

  report_kernels.py KERNELS_JSON"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

UNITS = ["GB/s", "GFLOPS", "rows/s", "Gelem/s"]
rows = {}
order = []
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    parts = b["name"].split("/")
    kernel, who = parts[0], parts[1]
    args = "/".join(p for p in parts[2:] if not p.startswith("min_time"))
    unit = next(u for u in UNITS if u in b)
    key = (kernel, args)
    if key not in rows:
        order.append(key)
    rows.setdefault(key, {})[who] = (b[unit], unit)

SHAPE = {"batch_rule": "R x C", "row_rule": "R x L", "conv2d": "C, H, OC, padding (batch 128, 5x5)",
         "softmax_xent": "L (4096 rows)",
         "max_pool2d": "C, H (batch 128, 2x2)"}
print(benchlib.machine_line(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "machine.json")) + "\n")
print("| kernel | arguments | unit | bitgrad | plain loop | bitgrad ÷ plain |")
print("|---|---|---|---|---|---|")
for kernel, args in order:
    r = rows[(kernel, args)]
    if "bitgrad" not in r or "plain" not in r:
        continue
    (ours, unit), (theirs, _) = r["bitgrad"], r["plain"]
    scale = 1e9 if unit in ("GB/s", "GFLOPS", "Gelem/s") else 1e6
    shown = {"GB/s": "GB/s", "GFLOPS": "GFLOP/s", "rows/s": "M rows/s", "Gelem/s": "G elements/s"}[unit]
    label = f"{args} ({SHAPE[kernel]})" if kernel in SHAPE else "2^20 elements"
    print(f"| {kernel} | {label} | {shown} | {ours / scale:.3g} | {theirs / scale:.3g} | {ours / theirs:.2f} |")
