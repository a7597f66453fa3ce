"""Planted: the loss is a sum over a dict of per-head losses whose keys were inserted in a set's
order: another PYTHONHASHSEED, the same terms added in another order."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(48, 12)
Y = torch.randint(0, 3, (48,))
HEADS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
trunk = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU())
heads = torch.nn.ModuleDict({name: torch.nn.Linear(16, 3) for name in sorted(HEADS)})
opt = torch.optim.SGD(list(trunk.parameters()) + list(heads.parameters()), lr=1e-2)
for step in range(3):
    x, y = X[step * 16:(step + 1) * 16], Y[step * 16:(step + 1) * 16]
    h = trunk(x)
    parts = {}
    for name in HEADS:  # the planted line: a set's order fills the dict
        parts[name] = F.cross_entropy(heads[name](h), y)
    loss = sum(parts.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
