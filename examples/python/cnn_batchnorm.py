"""A PyTorch user's CNN with batch normalisation on Fashion-MNIST, written as an nn.Module.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/cnn_batchnorm.py --steps 60

`model.train()` normalises by the batch and updates the running statistics (buffers, in
`state_dict()` under PyTorch's keys); `model.eval()` uses them. The same training at 1, 2 and 3
threads and with 0 and 2 loader workers gives one fingerprint (parameters and buffers).
"""
import argparse

import bitgrad as bg
from bitgrad import nn, optim


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(bg.relu(self.bn1(self.conv1(x))))
        x = self.pool(bg.relu(self.bn2(self.conv2(x))))
        return self.fc(bg.flatten(x, 1))


def run(steps, threads, workers):
    bg.set_num_threads(threads)
    bg.manual_seed(1)
    model = CNN()
    opt = optim.SGD(model, lr=0.05, momentum=0.9)
    loader = bg.data.DataLoader(bg.data.fashion_mnist(train=True), 32, workers=workers, seed=1)
    model.train()
    for _ in range(steps):
        x, y = loader.next()
        loss = bg.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x, y = bg.data.DataLoader(bg.data.fashion_mnist(train=False), 500, shuffle=False).next()
    with bg.no_grad():
        acc = float((model(x).argmax(1).numpy() == y.numpy()).mean())
    return bg.fingerprint(model.state_dict()), loss.item(), acc


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    print("state:", list(CNN().state_dict())[:7], "...")
    results = {}
    for threads, workers in ((1, 0), (2, 2), (3, 0)):
        fp, loss, acc = run(args.steps, threads, workers)
        results[(threads, workers)] = fp
        print(f"threads {threads} workers {workers}: last loss {loss:.6f}  accuracy on 500 {100 * acc:.1f}%  fingerprint {fp}")
    print("identical" if len(set(results.values())) == 1 else "DIFFERENT")
    assert len(set(results.values())) == 1


if __name__ == "__main__":
    main()
