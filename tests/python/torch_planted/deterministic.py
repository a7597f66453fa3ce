"""No cause planted: every generator seeded, the data order fixed, one thread count. Two runs
of it are the same bits."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(64, 3, 8, 8)
Y = torch.randint(0, 4, (64,))
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Dropout(0.2), torch.nn.Linear(8 * 64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16, shuffle=True)
for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
