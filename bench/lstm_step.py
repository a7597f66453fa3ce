#!/usr/bin/env python3
"""One LSTM step, forward and backward, bitgrad against PyTorch.

Batch 32, input 256, hidden 256 (torch.nn.LSTMCell's arguments; bitgrad.lstm_cell with the same
weights): x, h, c -> (h', c'), loss = sum(h' * g1) + sum(c' * g2), backward to the weights and
the inputs. Both run in this process, interleaved round by round, on the same thread count
(--threads; OPENBLAS_NUM_THREADS is set from it before torch loads, see docs/benchmarks.md);
each round times `--iters` steps of each; the ratio is bitgrad's median over PyTorch's.

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/lstm_step.py --threads 1
(with build/python on PYTHONPATH, or after `make python`)."""
import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--iters", type=int, default=50)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--input", type=int, default=256)
a = ap.parse_args()
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import bitgrad as bg  # noqa: E402

torch.set_num_threads(a.threads)
bg.set_num_threads(a.threads)
N, I, H = a.batch, a.input, a.hidden
rng = np.random.RandomState(0)
arr = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in
       dict(x=(N, I), h=(N, H), c=(N, H), wi=(4 * H, I), wh=(4 * H, H), bi=(4 * H,), bh=(4 * H,), g1=(N, H), g2=(N, H)).items()}

tb = {k: bg.from_numpy(v) for k, v in arr.items()}
tt = {k: torch.from_numpy(v) for k, v in arr.items()}
for d in (tb, tt):
    for k in ("x", "h", "c", "wi", "wh", "bi", "bh"):
        d[k].requires_grad_(True)


def step_bg():
    for k in ("x", "h", "c", "wi", "wh", "bi", "bh"):
        tb[k].grad = None
    h, c = bg.lstm_cell(tb["x"], tb["h"], tb["c"], tb["wi"], tb["wh"], tb["bi"], tb["bh"])
    (bg.sum(h * tb["g1"]) + bg.sum(c * tb["g2"])).backward()


def step_th():
    for k in ("x", "h", "c", "wi", "wh", "bi", "bh"):
        tt[k].grad = None
    h, c = torch._VF.lstm_cell(tt["x"], (tt["h"], tt["c"]), tt["wi"], tt["wh"], tt["bi"], tt["bh"])
    ((h * tt["g1"]).sum() + (c * tt["g2"]).sum()).backward()


def timed(f):
    t0 = time.perf_counter()
    for _ in range(a.iters):
        f()
    return (time.perf_counter() - t0) / a.iters * 1e3


for f in (step_bg, step_th):  # warm-up
    for _ in range(5):
        f()
tbg, tth = [], []
for r in range(a.rounds):
    order = (step_bg, step_th) if r % 2 == 0 else (step_th, step_bg)
    for f in order:
        (tbg if f is step_bg else tth).append(timed(f))
mb, mt = statistics.median(tbg), statistics.median(tth)
ratios = [b / t for b, t in zip(tbg, tth)]
print("LSTM step (batch %d, input %d, hidden %d, %d thread%s), forward + backward, ms: bitgrad %.3f, PyTorch %.3f; "
      "ratio %.2f (median of per-round ratios %.2f)" % (N, I, H, a.threads, "" if a.threads == 1 else "s", mb, mt, mb / mt,
                                                         statistics.median(ratios)))
print("cpu:", bg.cpu_model() if hasattr(bg, "cpu_model") else "?", "isa:", bg.get_isa())
sys.exit(0)
