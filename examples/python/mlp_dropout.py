"""A PyTorch user's MLP: a custom nn.Module with dropout, trained with AdamW on Fashion-MNIST.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/mlp_dropout.py --steps 200

Written as for PyTorch: `class MLP(nn.Module)`, `model.train()` / `model.eval()`, `model(x)`. The
differences: `bitgrad.manual_seed` keys every layer and dropout mask (no hidden generator
state), and the run is trained twice (1 and 2 threads, 0 and 2 loader workers) to the same
fingerprint.
"""
import argparse

import bitgrad as bg
from bitgrad import nn, optim


class MLP(nn.Module):
    def __init__(self, hidden=128, p=0.2):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, hidden)
        self.drop1 = nn.Dropout(p)            # no layer_id: each Dropout gets its own masks
        self.fc2 = nn.Linear(hidden, hidden)
        self.drop2 = nn.Dropout(p)
        self.out = nn.Linear(hidden, 10)

    def forward(self, x):
        x = self.drop1(bg.relu(self.fc1(self.flatten(x))))
        x = self.drop2(bg.relu(self.fc2(x)))
        return self.out(x)


def run(steps, threads, workers, log=True):
    bg.set_num_threads(threads)
    bg.manual_seed(0)                          # the layers and the masks, in program order
    model = MLP()
    opt = optim.AdamW(model, lr=1e-3, weight_decay=0.01)
    loader = bg.data.DataLoader(bg.data.fashion_mnist(train=True), 64, workers=workers, seed=0)
    model.train()
    for step in range(steps):
        x, y = loader.next()
        loss = bg.cross_entropy(model(x), y)  # each training call takes the next step's masks
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log and (step + 1) % max(1, steps // 4) == 0:
            print(f"  step {step + 1:4d}  loss {loss.item():.6f}")
    model.eval()
    test = bg.data.DataLoader(bg.data.fashion_mnist(train=False), 1000, shuffle=False, drop_last=False)
    with bg.no_grad():
        correct = sum(int((model(b.x).argmax(1).numpy() == b.y.numpy()).sum()) for b in test)
    return bg.fingerprint(model), correct / 10000


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    fp1, acc = run(args.steps, 1, 0)
    print(f"test accuracy {100 * acc:.2f}%  fingerprint {fp1}")
    fp2, _ = run(args.steps, 2, 2, log=False)
    print(f"2 threads, 2 workers: fingerprint {fp2}")
    print("identical" if fp1 == fp2 else "DIFFERENT")
    assert fp1 == fp2


if __name__ == "__main__":
    main()
