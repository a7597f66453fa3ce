#!/usr/bin/python3
"""The accuracy tables of docs/numerics.md (`make accuracy-sums`): f32 GEMM and f32 row sums
against the float64 result, bitgrad beside PyTorch 1.13 and NumPy, five seeds.

  GEMM:     [32, k] x [k, 16], standard normal f32 inputs; the reference is the f64 product of
            the same f32 values (exact products, a BLAS dgemm's sum: 1e-16 relative, far below
            what is measured)
  row sums: 512 rows of length k (as many sums as the GEMM's outputs), standard normal f32;
            bitgrad's sum over the last axis (the row rule, numerics §4), NumPy's (pairwise),
            PyTorch's; the reference is math.fsum per row

Each error is |result - reference| / max |reference| over the outputs; a cell gives the median
over the seeds of the rms and of the max over the outputs. A row "≤" says whether bitgrad's
median rms and median max are both at or below the peer's.

  PYTHONPATH=build/python /usr/bin/python3 bench/accuracy.py [--ks 16,64,...] [--seeds 5] [--json OUT]
"""
import argparse
import json
import math
import os
import statistics
import sys

import numpy as np
import torch

import bitgrad as bg

KS = [16, 64, 512, 2048, 8192, 32768, 131072]


def errors(got, ref):
    scale = float(np.max(np.abs(ref)))
    e = np.abs(got.astype(np.float64) - ref) / scale
    return float(np.sqrt(np.mean(e * e))), float(np.max(e))


def gemm_case(k, seed):
    rng = np.random.default_rng(seed)  # test data only: no result of bitgrad's depends on it
    a = rng.standard_normal((32, k)).astype(np.float32)
    b = rng.standard_normal((k, 16)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ours = bg.matmul(bg.tensor(a), bg.tensor(b)).numpy()
    theirs = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    return {"bitgrad": errors(ours, ref), "torch": errors(theirs, ref)}


def sum_case(k, seed):
    rng = np.random.default_rng(1000 + seed)
    x = rng.standard_normal((512, k)).astype(np.float32)
    ref = np.array([math.fsum(row.tolist()) for row in x])
    ours = bg.sum(bg.tensor(x), [1]).numpy()
    return {"bitgrad": errors(ours, ref), "numpy": errors(np.sum(x, axis=1), ref),
            "torch": errors(torch.from_numpy(x).sum(dim=1).numpy(), ref)}


def table(name, case, ks, seeds, peers):
    rows = []
    for k in ks:
        runs = [case(k, s) for s in range(seeds)]
        med = {w: (statistics.median(r[w][0] for r in runs), statistics.median(r[w][1] for r in runs)) for w in runs[0]}
        rows.append({"k": k, "median": med})
        print(f"{name} k={k}: " + "  ".join(f"{w} {v[0]:.2e}/{v[1]:.2e}" for w, v in med.items()), file=sys.stderr, flush=True)
    head = "| k | bitgrad rms / max | " + " | ".join(f"{p} rms / max | bitgrad ≤ {p}" for p in peers) + " |"
    lines = [head, "|---|---|" + "---|---|" * len(peers)]
    for r in rows:
        m = r["median"]
        cells = [f"{m['bitgrad'][0]:.2e} / {m['bitgrad'][1]:.2e}"]
        for p in peers:
            ok = m["bitgrad"][0] <= m[p][0] and m["bitgrad"][1] <= m[p][1]
            cells += [f"{m[p][0]:.2e} / {m[p][1]:.2e}", "yes" if ok else "**no**"]
        lines.append(f"| {r['k']:,} | " + " | ".join(cells) + " |")
    return rows, "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default=",".join(map(str, KS)))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    bg.set_num_threads(1)
    ks = [int(x) for x in a.ks.split(",")]
    g_rows, g_tab = table("gemm", gemm_case, ks, a.seeds, ["torch"])
    s_rows, s_tab = table("sum", sum_case, ks, a.seeds, ["numpy", "torch"])
    print(f"bitgrad {bg.__version__} (numerics {bg.numerics_version}), torch {torch.__version__}, numpy {np.__version__}; "
          f"{a.seeds} seeds, median over the seeds of each run's rms and max error relative to the largest output\n")
    print("f32 GEMM `[32, k] × [k, 16]` against the f64 product:\n")
    print(g_tab)
    print("\nf32 row sums (512 rows of length k) against the exact sum:\n")
    print(s_tab)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gemm": g_rows, "sum": s_rows}, f, indent=1)


if __name__ == "__main__":
    main()
