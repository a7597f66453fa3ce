#!/usr/bin/python3
"""Median GFLOP/s per shape, library and thread count from bench/run.sh's JSON files, as the
markdown table of docs/benchmarks.md."""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

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
print(benchlib.machine_line(os.path.join(out, "machine.json")) + "\n")
print("FMA peak per core (f32): AVX-512 %.1f GFLOP/s, AVX2 %.1f GFLOP/s\n" % (p512, peak.get("avx2", 0.0)))
print("| shape (M,N,K, stored transposes) | threads | bitgrad GFLOP/s | OpenBLAS GFLOP/s | BLIS (skx) GFLOP/s "
      "| bitgrad ÷ faster of the two | bitgrad % of peak |")
print("|---|---|---|---|---|---|---|")
shapes = []
for (shape, t, lib) in runs:
    if shape not in shapes:
        shapes.append(shape)
worst = {}
for shape in shapes:
    for t in (1, 2):
        ours = runs.get((shape, t, "bitgrad"))
        if not ours:
            continue
        mo = statistics.median(ours)
        peers = {lib: statistics.median(runs[(shape, t, lib)]) for lib in ("openblas", "blis") if (shape, t, lib) in runs}
        best = max(peers.values()) if peers else float("nan")
        pct = 100.0 * mo / (p512 * t) if p512 else 0.0
        cell = lambda lib: "%.1f" % peers[lib] if lib in peers else "–"
        print("| %s | %d | %.1f | %s | %s | %.2f | %.0f%% |" % (shape, t, mo, cell("openblas"), cell("blis"), mo / best, pct))
        kind = "MLP" if ("_128x" in shape or "_784x" in shape) else ("CNN" if shape.startswith("conv") else "square")
        worst[(kind, t)] = min(worst.get((kind, t), 9e9), mo / best)
print("\n(medians of %d alternating runs per library, each in its own process)\n" % len(next(iter(runs.values()))))
for (kind, t), r in sorted(worst.items()):
    tgt = " (target ≥ 0.95: %s)" % ("met" if r >= 0.95 else "missed") if kind == "MLP" else ""
    print("- lowest bitgrad ÷ faster peer on the %s shapes at %d thread%s: %.2f%s" % (kind, t, "s" if t > 1 else "", r, tgt))
