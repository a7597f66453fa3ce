"""Planted: an augmentation that draws from NumPy's global generator, which nobody seeds. In
the main process (num_workers=0) it starts elsewhere in every run; in DataLoader workers PyTorch
reseeds it from the loader's seed and the worker's number, so the noise follows the worker
layout."""
import numpy
import torch
import torch.nn.functional as F

torch.manual_seed(0)


class Noisy(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(64, 12, generator=g)
        self.y = torch.randint(0, 3, (64,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        noise = torch.from_numpy(numpy.random.normal(0.0, 0.1, 12).astype("float32"))
        return self.x[i] + noise, self.y[i]


if __name__ == "__main__":
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for x, y in torch.utils.data.DataLoader(Noisy(), batch_size=16, shuffle=True):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
