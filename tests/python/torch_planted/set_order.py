"""Planted: the training list is built by iterating a set of class names, whose order follows
the strings' hashes: another PYTHONHASHSEED, another order of the samples."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
CLASSES = {"cat", "dog", "bird", "fish", "frog", "horse"}
samples = []
for name in CLASSES:  # the planted line: set order
    label = sorted(CLASSES).index(name)
    g = torch.Generator().manual_seed(label)
    for _ in range(8):
        samples.append((torch.randn(12, generator=g) + label, label))
X = torch.stack([s[0] for s in samples])
Y = torch.tensor([s[1] for s in samples])
model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
for x, y in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
