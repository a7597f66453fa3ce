# Where an LSTM layer's forward time goes (docs/benchmarks.md, the zoo's first profile): nn.LSTM over
# [64, 32, 64] with hidden 256 at 1 thread, beside PyTorch's; the input projection as one GEMM,
# the 32 recurrent GEMMs, the gates' elementwise work (as ops), and the throughput of bitgrad's
# sigmoid, tanh and exp per element. Medians of 15.
#   PYTHONPATH=build/python /usr/bin/python3 bench/lstm_profile.py

import numpy as np
import torch

import bitgrad as bg
from benchlib import median_ms

bg.set_num_threads(1)
torch.set_num_threads(1)
N, T, I, H = 64, 32, 64, 256
FL_PROJ, FL_REC = 2 * N * T * I * 4 * H, 2 * T * N * H * 4 * H


def tm(f, n=15):
    return median_ms(f, n)


r = np.random.RandomState(0)
xn = r.randn(N, T, I).astype(np.float32)
x = bg.tensor(xn)
m = bg.nn.LSTM(I, H, batch_first=True)
w_ih, w_hh, b_ih, b_hh = [p for _, p in m.named_parameters()]
h = bg.tensor(r.randn(N, H).astype(np.float32) * 0.1)
g = bg.tensor(r.randn(N, 4 * H).astype(np.float32))
x2 = bg.reshape(x, [N * T, I])


def gates():
    for _ in range(T):
        i, f = bg.sigmoid(bg.slice(g, 1, 0, H)), bg.sigmoid(bg.slice(g, 1, H, 2 * H))
        gg, o = bg.tanh(bg.slice(g, 1, 2 * H, 3 * H)), bg.sigmoid(bg.slice(g, 1, 3 * H, 4 * H))
        bg.mul(o, bg.tanh(bg.add(bg.mul(f, h), bg.mul(i, gg))))


tl, xt = torch.nn.LSTM(I, H, batch_first=True), torch.from_numpy(xn)
with bg.no_grad(), torch.no_grad():
    whole, peer = tm(lambda: m(x)), tm(lambda: tl(xt))
    proj = tm(lambda: bg.linear(x2, w_ih, b_ih))
    rec = tm(lambda: [bg.linear(h, w_hh, b_hh) for _ in range(T)])
    gt = tm(gates)
    big = bg.tensor(r.randn(1 << 21).astype(np.float32))
    per = {name: tm(lambda f=getattr(bg, name): f(big)) * 1e6 / big.numel() for name in ("sigmoid", "tanh", "exp")}
print("lstm layer forward: bitgrad %.2f ms (%.1f GFLOP/s), torch %.2f ms (%.1f GFLOP/s)"
      % (whole, (FL_PROJ + FL_REC) / whole / 1e6, peer, (FL_PROJ + FL_REC) / peer / 1e6))
print("  input projection, one GEMM [%d, %d] x [%d, %d]: %.2f ms (%.1f GFLOP/s)" % (N * T, I, I, 4 * H, proj, FL_PROJ / proj / 1e6))
print("  %d recurrent GEMMs [%d, %d] x [%d, %d]: %.2f ms (%.1f GFLOP/s)" % (T, N, H, H, 4 * H, rec, FL_REC / rec / 1e6))
print("  gates as ops, %d steps: %.2f ms" % (T, gt))
print("  elementwise, ns per element on 2M: " + ", ".join("%s %.2f" % kv for kv in per.items()))
