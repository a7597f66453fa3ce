"""Planted: dropout draws from torch's global generator, which the script never seeds (the
weights and the data come from a seeded generator of their own). It also times itself with the
wall clock, which is no seed."""
import time

import torch
import torch.nn.functional as F

g = torch.Generator().manual_seed(0)
X = torch.randn(48, 12, generator=g)
Y = torch.randint(0, 3, (48,), generator=g)
model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randn(p.shape, generator=g) * 0.1)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
started = time.time()
for step in range(3):
    x, y = X[step * 16:(step + 1) * 16], Y[step * 16:(step + 1) * 16]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
elapsed = time.time() - started
