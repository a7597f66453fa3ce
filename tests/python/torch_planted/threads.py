"""Planted: nothing but the thread count. A convolution's weight gradient is a sum over the
batch that PyTorch's CPU kernel (oneDNN) splits by the thread count."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(64, 3, 16, 16)
Y = torch.randint(0, 10, (64,))
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 256, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
for step in range(3):
    x, y = X[step * 16:(step + 1) * 16], Y[step * 16:(step + 1) * 16]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
