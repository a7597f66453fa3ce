# resnet18's convolutions one by one (b32, 3x32x32 input: the zoo's shapes) and its padded max
# pooling, forward without gradients at 1 thread, bitgrad beside PyTorch 1.13 (docs/benchmarks.md,
# "The zoo, fourth round"). Medians of 21 calls; the total weights each shape by how often resnet18
# runs it. GFLOP/s count the direct convolution's multiply-adds (x2). With --backward: the
# backward alone (input and weight gradients from a given dy, no bias; "The zoo, fifth round"),
# GFLOP/s counting both gradients' multiply-adds.
#   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=build/python /usr/bin/python3 bench/conv_layers.py [threads] [--backward]
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import bitgrad as bg
from benchlib import median_ms

args = [a for a in sys.argv[1:] if a != "--backward"]
backward = "--backward" in sys.argv[1:]
threads = int(args[0]) if args else 1
bg.set_num_threads(threads)
torch.set_num_threads(threads)
N = 32
SHAPES = [  # channels in, image side, channels out, kernel, stride, padding, times in resnet18
    (3, 32, 64, 7, 2, 3, 1), (64, 8, 64, 3, 1, 1, 4), (64, 8, 128, 3, 2, 1, 1), (128, 4, 128, 3, 1, 1, 3),
    (64, 8, 128, 1, 2, 0, 1), (128, 4, 256, 3, 2, 1, 1), (256, 2, 256, 3, 1, 1, 3), (128, 4, 256, 1, 2, 0, 1),
    (256, 2, 512, 3, 2, 1, 1), (512, 1, 512, 3, 1, 1, 3), (256, 2, 512, 1, 2, 0, 1)]


def tm(f, n=21):
    return median_ms(f, n)


r = np.random.RandomState(0)
total_b = total_t = 0.0


def backward_ms(side, n=21):
    """Median ms of side() -> seconds its backward took (the forward before it untimed)."""
    side()
    return 1e3 * statistics.median(side() for _ in range(n))


if backward:
    print("| input | weight | stride, pad | times | bitgrad backward ms | torch backward ms | bitgrad ÷ torch | bitgrad GFLOP/s | torch GFLOP/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for C, H, OC, k, s, p, times in SHAPES:
        oh = (H + 2 * p - k) // s + 1
        x = r.randn(N, C, H, H).astype(np.float32)
        w = (r.randn(OC, C, k, k) * 0.05).astype(np.float32)
        dy = r.randn(N, OC, oh, oh).astype(np.float32)
        need_dx = C != 3  # resnet18's first convolution reads the image: no input gradient
        xb, wb = bg.tensor(x, requires_grad=need_dx), bg.tensor(w, requires_grad=True)
        xt, wt = torch.from_numpy(x).requires_grad_(need_dx), torch.from_numpy(w).requires_grad_()
        gb, gt = bg.tensor(dy), torch.from_numpy(dy)

        def side(conv, xs, ws, g):
            def once():
                xs.grad, ws.grad = None, None
                y = conv(xs, ws, None, s, p)
                t0 = time.perf_counter()
                y.backward(g)
                return time.perf_counter() - t0
            return once

        b, t = backward_ms(side(bg.conv2d, xb, wb, gb)), backward_ms(side(F.conv2d, xt, wt, gt))
        flop = 2 * N * OC * oh * oh * C * k * k * (2 if need_dx else 1)
        total_b += b * times
        total_t += t * times
        print("| [%d, %d, %d, %d] | [%d, %d, %d, %d] | %d, %d | %d | %.3f | %.3f | %.2f | %.0f | %.0f |"
              % (N, C, H, H, OC, C, k, k, s, p, times, b, t, b / t, flop / b / 1e6, flop / t / 1e6))
    print("| all of resnet18's | | | | %.2f | %.2f | %.2f | | |" % (total_b, total_t, total_b / total_t))
    sys.exit(0)

print("| input | weight | stride, pad | times | bitgrad ms | torch ms | bitgrad ÷ torch | bitgrad GFLOP/s | torch GFLOP/s |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
with torch.no_grad(), bg.no_grad():
    for C, H, OC, k, s, p, times in SHAPES:
        x = r.randn(N, C, H, H).astype(np.float32)
        w = (r.randn(OC, C, k, k) * 0.05).astype(np.float32)
        xb, wb, xt, wt = bg.tensor(x), bg.tensor(w), torch.from_numpy(x), torch.from_numpy(w)
        b = tm(lambda: bg.conv2d(xb, wb, None, s, p))
        t = tm(lambda: F.conv2d(xt, wt, None, s, p))
        oh = (H + 2 * p - k) // s + 1
        flop = 2 * N * OC * oh * oh * C * k * k
        total_b += b * times
        total_t += t * times
        print("| [%d, %d, %d, %d] | [%d, %d, %d, %d] | %d, %d | %d | %.3f | %.3f | %.2f | %.0f | %.0f |"
              % (N, C, H, H, OC, C, k, k, s, p, times, b, t, b / t, flop / b / 1e6, flop / t / 1e6))
    print("| all of resnet18's | | | | %.2f | %.2f | %.2f | | |" % (total_b, total_t, total_b / total_t))
    x = r.randn(N, 64, 16, 16).astype(np.float32)
    xb, xt = bg.tensor(x), torch.from_numpy(x)
    b = tm(lambda: bg.max_pool2d(xb, 3, 2, 1))
    t = tm(lambda: F.max_pool2d(xt, 3, 2, 1))
    print("| max_pool2d 3x3, stride 2, pad 1 | [%d, 64, 16, 16] | | 1 | %.3f | %.3f | %.2f | | |" % (N, b, t, b / t))
