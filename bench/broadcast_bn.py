"""Broadcasting over any axis and batch norm: bitgrad against PyTorch in one process.

Each case runs NUMBER times per sample, REPEAT samples, alternating bitgrad and torch; the median per
call and the ratio bitgrad / torch (same run) are printed as a Markdown table. Both at THREADS threads.
Run: PYTHONPATH=build/python /usr/bin/python3 bench/broadcast_bn.py  (THREADS=1 NUMBER=20 REPEAT=15)"""
import os
import statistics
import time

import numpy as np

import bitgrad as bg
import torch

THREADS = int(os.environ.get("THREADS", "1"))
NUMBER = int(os.environ.get("NUMBER", "20"))
REPEAT = int(os.environ.get("REPEAT", "15"))


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def timed(fn):
    fn()
    t0 = time.perf_counter()
    for _ in range(NUMBER):
        fn()
    return (time.perf_counter() - t0) / NUMBER


def pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return bg.from_numpy(a.copy()), torch.from_numpy(a.copy())


def main():
    torch.set_num_threads(THREADS)
    bg.set_num_threads(THREADS)
    cases = []
    big = (64, 16, 28, 28)
    for name, small in [("middle  [64,16,28,28] * [1,16,1,1]", (1, 16, 1, 1)), ("leading [64,16,28,28] * [1,16,28,28]", (1, 16, 28, 28)),
                        ("trailing [64,16,28,28] * [28]", (28,)), ("two axes [64,16,28,28] * [64,1,28,1]", (64, 1, 28, 1))]:
        bx, tx = pair(big, 1)
        bs, ts = pair(small, 2)
        cases.append((name + " forward", lambda bx=bx, bs=bs: bx * bs, lambda tx=tx, ts=ts: tx * ts))
        bxg, bsg = bx.detach(), bs.detach()
        bxg.requires_grad = True
        bsg.requires_grad = True
        txg, tsg = tx.detach().requires_grad_(), ts.detach().requires_grad_()
        gb, gt = pair(big, 3)

        def bgfb(x=bxg, s=bsg, g=gb):
            (x * s).backward(g)

        def tfb(x=txg, s=tsg, g=gt):
            (x * s).backward(g)

        cases.append((name + " fwd+bwd", bgfb, tfb))
    for shape in [(64, 16, 28, 28), (64, 32, 14, 14), (64, 512)]:
        c = shape[1]
        bx, tx = pair(shape, 4)
        bx.requires_grad = True
        tx.requires_grad_()
        bw, bb = bg.ones(c, requires_grad=True), bg.zeros(c, requires_grad=True)
        tw, tb = torch.ones(c, requires_grad=True), torch.zeros(c, requires_grad=True)
        brm, brv = bg.zeros(c), bg.ones(c)
        trm, trv = torch.zeros(c), torch.ones(c)
        gb, gt = pair(shape, 5)

        def bgbn(x=bx, w=bw, b=bb, rm=brm, rv=brv, g=gb):
            bg.batch_norm(x, rm, rv, w, b, training=True).backward(g)

        def tbn(x=tx, w=tw, b=tb, rm=trm, rv=trv, g=gt):
            torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True).backward(g)

        cases.append(("batch_norm %s fwd+bwd" % (list(shape),), bgbn, tbn))
    print("cpu: %s; bitgrad %s (%s); torch %s; %d thread(s); %d x %d calls, median" % (
        cpu_name(), bg.__version__, bg.get_isa(), torch.__version__, THREADS, REPEAT, NUMBER))
    print("| case | bitgrad ms | torch ms | ratio |")
    print("|---|---|---|---|")
    for name, fb, ft in cases:
        tb_, tt_ = [], []
        for _ in range(REPEAT):
            tb_.append(timed(fb))
            tt_.append(timed(ft))
        mb, mt = statistics.median(tb_) * 1e3, statistics.median(tt_) * 1e3
        print("| %s | %.3f | %.3f | %.2f |" % (name, mb, mt, mb / mt), flush=True)


if __name__ == "__main__":
    main()
