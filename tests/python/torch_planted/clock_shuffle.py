"""Planted: the shuffle's generator is seeded from the wall clock."""
import time

import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(64, 12)
Y = torch.randint(0, 3, (64,))
model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
shuffle = torch.Generator().manual_seed(time.time_ns())  # the planted line
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16, shuffle=True, generator=shuffle)
for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
