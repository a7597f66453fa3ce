"""A PyTorch user's residual network: a BasicBlock module (conv, batch norm, ReLU, conv, batch norm,
a 1x1 projection on the skip path when the shape changes), blocks in an nn.Sequential mixed with
C++ layers, trained a few steps on Fashion-MNIST with recomputation (bitgrad.checkpoint) of
each block, to the bits of the run without it (contract T9).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/resnet_block.py --steps 20
"""
import argparse

import bitgrad as bg
from bitgrad import nn, optim


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.ConvNd2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.ConvNd2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.ConvNd2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = bg.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return bg.relu(out + skip)


class ResNet(nn.Module):
    def __init__(self, recompute=False):
        super().__init__()
        self.recompute = recompute
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.ModuleList([BasicBlock(8, 8), BasicBlock(8, 16, stride=2)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            # recomputed in the backward instead of kept: the same bits (T9)
            x = bg.checkpoint(block, x, block) if self.recompute else block(x)
        return self.fc(bg.flatten(self.pool(x), 1))


def run(steps, recompute):
    bg.manual_seed(2)
    model = ResNet(recompute)
    opt = optim.SGD(model, lr=0.05, momentum=0.9, weight_decay=5e-4)
    loader = bg.data.DataLoader(bg.data.fashion_mnist(train=True), 32, seed=2)
    for _ in range(steps):
        x, y = loader.next()
        loss = bg.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return bg.fingerprint(model.state_dict()), loss.item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    print(ResNet())
    fp1, loss1 = run(args.steps, False)
    print(f"kept activations: loss {loss1:.6f}  fingerprint {fp1}")
    fp2, loss2 = run(args.steps, True)
    print(f"recomputed:       loss {loss2:.6f}  fingerprint {fp2}")
    print("identical" if fp1 == fp2 else "DIFFERENT")
    assert fp1 == fp2


if __name__ == "__main__":
    main()
