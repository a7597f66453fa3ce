#!/usr/bin/python3
"""The PyTorch side of the peer benchmark (bench/peer.sh): the models, data, batch, optimizer
and schedule of bitgrad's examples, trained the way a PyTorch user would, one configuration per
process. Prints one JSON line: median ms per step, samples/s over the run, peak RSS.

The BLAS and the thread count are chosen by the environment of the process (OpenBLAS reads
OPENBLAS_NUM_THREADS when it is loaded; LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blis-openmp
makes libblas.so.3 BLIS, which reads BLIS_NUM_THREADS/OMP_NUM_THREADS); --threads also sets
torch.set_num_threads for PyTorch's own kernels.

  peer_torch.py --model mlp|cnn|adder|widemlp --threads N [--steps N] [--batch B] [--width W]
                [--deterministic] [--label NAME]
"""
import argparse
import gzip
import json
import math
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION = "/usr/share/datasets/fashion-mnist"


def fashion(images_as):
    with gzip.open(os.path.join(FASHION, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    # examples/*.toml: normalize = true
    x = ((x.astype(np.float32) / np.float32(255)) - np.float32(0.2860)) / np.float32(0.3530)
    x = torch.from_numpy(x)
    if images_as == "nchw":
        x = x.reshape(-1, 1, 28, 28)
    return x, torch.from_numpy(y.astype(np.int64))


def mlp(width):
    # examples/fashion_mlp.toml: 784-512-512-10
    return nn.Sequential(nn.Flatten(), nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


def cnn():
    # examples/fashion_cnn.toml
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=["mlp", "cnn", "adder"])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=0, help="0: one epoch")
    ap.add_argument("--batch", type=int, default=0, help="0: the example's")
    ap.add_argument("--width", type=int, default=512, help="mlp hidden width")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--label", default="pytorch")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)

    if a.model == "adder":
        # examples/adder.toml: batch 10000 of 10 uniform features, target their sum; linear 10 -> 1
        batch = a.batch or 10000
        model = nn.Linear(10, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        steps = a.steps or 1000  # one epoch of examples/adder.toml

        def data(step):
            x = torch.rand(batch, 10, generator=g)
            return x, x.sum(dim=1, keepdim=True)

        loss_fn = F.mse_loss
    else:
        batch = a.batch or 128
        x_all, y_all = fashion("nchw" if a.model == "cnn" else "flat")
        model = cnn() if a.model == "cnn" else mlp(a.width)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        per_epoch = x_all.shape[0] // batch
        steps = a.steps or per_epoch
        perm = torch.randperm(x_all.shape[0], generator=g)

        def data(step):
            k = step % per_epoch
            nonlocal perm
            if k == 0 and step > 0:
                perm = torch.randperm(x_all.shape[0], generator=g)
            idx = perm[k * batch:(k + 1) * batch]
            return x_all[idx], y_all[idx]

        loss_fn = F.cross_entropy
    warmup = min(10, steps // 10)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=warmup + steps)

    times = []
    t_start = None
    for step in range(warmup + steps):
        if step == warmup:
            t_start = time.perf_counter()
        t0 = time.perf_counter()
        x, y = data(step)
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        t1 = time.perf_counter()
        if step >= warmup:
            times.append((t1 - t0) * 1e3)
    total = time.perf_counter() - t_start
    if not math.isfinite(float(loss)):
        print("peer_torch: the loss is not finite", file=sys.stderr)
        sys.exit(1)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    blas = "openblas"
    if "blis" in os.environ.get("LD_LIBRARY_PATH", ""):
        blas = "blis-skx" if os.environ.get("BLIS_ARCH_TYPE") == "0" else "blis"
    print(json.dumps({
        "framework": a.label, "model": a.model, "threads": a.threads, "batch": batch,
        "width": a.width if a.model == "mlp" else None, "blas": blas, "deterministic": a.deterministic,
        "steps": steps, "ms_per_step": statistics.median(times), "samples_per_s": steps * batch / total,
        "peak_rss_mb": rss_mb, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
