#!/usr/bin/python3
"""f32 sigmoid and tanh of bitgrad (numerics §8's f32 formulas) and of PyTorch 1.13 on the CPU,
on every 1021st f32 bit pattern (NaNs left out): the largest error in ulps of the f32 format
(subnormal spacing at the bottom), over every input and over the normal results only, and the
share of results that are not the float64 value rounded once. The reference is float64 NumPy
(1 / (1 + exp(-x)), tanh), within about 1e-16 relative: far below what is measured.
`build/bin/mathfn_accuracy --f32-all` runs all 2^32 inputs of bitgrad's alone.

  PYTHONPATH=build/python /usr/bin/python3 bench/f32_functions_accuracy.py
"""
import numpy as np
import torch

import bitgrad as bg

torch.set_num_threads(1)
bits = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32)
x = bits.view(np.float32)
x = x[~np.isnan(x)]
xd = x.astype(np.float64)
with np.errstate(over="ignore"):
    refs = {"sigmoid": 1.0 / (1.0 + np.exp(-xd)), "tanh": np.tanh(xd)}


def ulps(got, ref):
    _, e = np.frexp(ref)
    e = np.maximum(np.where(ref == 0, -125, e), -125)
    return np.abs(got.astype(np.float64) - ref) / np.ldexp(1.0, e - 24)


print("%d inputs; torch %s, bitgrad %s (numerics %d)" % (x.size, torch.__version__, bg.__version__, bg.numerics_version))
print("| function | library | max ulp | at | max ulp, normal results | not the f64 value rounded |")
print("|---|---|---|---|---|---|")
for name in ("sigmoid", "tanh"):
    ref = refs[name]
    normal = np.abs(ref) >= 2.0 ** -126
    for lib, got in (("bitgrad", getattr(bg, name)(bg.tensor(x)).numpy()), ("torch", getattr(torch, name)(torch.from_numpy(x)).numpy())):
        u = ulps(got, ref)
        i = int(np.argmax(u))
        print("| %s | %s | %.3f | %.9g | %.3f | %.3f%% |" % (name, lib, u[i], x[i], u[normal].max(), 100.0 * np.mean(got != ref.astype(np.float32))))
