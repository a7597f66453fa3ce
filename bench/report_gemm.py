#!/usr/bin/python3
"""Median GFLOP/s per shape, library and thread count from bench/run.sh's JSON files, as the
markdown table of docs/benchmarks.md."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
peak = {}
for b in json.load(open(os.path.join(out, "peak.json")))["benchmarks"]:
    peak[b["name"].split("/")[1]] = b["GFLOPS"] / 1e9
runs = {}
for path in sorted(glob.glob(os.path.join(out, "gemm-*.json"))):
    for b in json.load(open(path))["benchmarks"]:
        lib, shape, threads = b["name"].split("/")[:3]
        t = int(threads.split(":")[1])
        runs.setdefault((shape, t, lib), []).append(b["GFLOPS"] / 1e9)
p512 = peak.get("avx512", 0.0)
print("FMA peak per core (f32): AVX-512 %.1f GFLOP/s, AVX2 %.1f GFLOP/s\n" % (p512, peak.get("avx2", 0.0)))
print("| shape (M,N,K, stored transposes) | threads | bitgrad GFLOP/s | OpenBLAS GFLOP/s | bitgrad / OpenBLAS | bitgrad % of peak |")
print("|---|---|---|---|---|---|")
shapes = []
for (shape, t, lib) in runs:
    if shape not in shapes:
        shapes.append(shape)
for shape in shapes:
    for t in (1, 2):
        ours = runs.get((shape, t, "bitgrad"))
        theirs = runs.get((shape, t, "openblas"))
        if not ours or not theirs:
            continue
        mo, mt = statistics.median(ours), statistics.median(theirs)
        pct = 100.0 * mo / (p512 * t) if p512 else 0.0
        print("| %s | %d | %.1f | %.1f | %.2f | %.0f%% |" % (shape, t, mo, mt, mo / mt, pct))
print("\n(medians of %d alternating runs per library, each in its own process)" % len(next(iter(runs.values()))))
