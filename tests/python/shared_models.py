"""Models whose parameters are used twice in one forward (numerics.md §10, "Uses"): a module
called twice, an LM head tied to its embedding (PyTorch's `head.weight = tok.weight`), one
embedding shared by two inputs. Each builds its batch (x, y) from a seed; under mpirun,
`python3 shared_models.py NAME` trains two steps with DataParallel and prints the fingerprint.
"""
import sys

import numpy as np

import bitgrad as bg
from bitgrad import nn

V, D, T = 11, 8, 4


class LinearFn(bg.autograd.Function):
    """linear(x, w, b) as a custom function: each parameter's gradient one sum over the samples."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return bg.linear(x, w, b)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        shape = x.shape
        g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, shape[-1])
        if len(shape) == 2:
            return g @ w, g2.T @ x2, bg.sum(g2, 0)
        # samples of several rows: each sample's rows first, then the samples (numerics §3)
        return g @ w, bg.sum(bg.matmul(g.transpose(1, 2), x), 0), bg.sum(bg.sum(g, 1), 0)


class SharedModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.out = nn.Linear(D, 5)

    def forward(self, x):
        return self.out(bg.tanh(self.fc(bg.tanh(self.fc(x)))))


class TiedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.fc = nn.Linear(D, D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.tok.weight  # PyTorch's tying

    def forward(self, x):
        return bg.sum(self.head(bg.tanh(self.fc(self.tok(x)))), 1)  # [N, T, V] -> [N, V]


class SharedEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.fc = nn.Linear(D, D)
        self.out = nn.Linear(D, 5)

    def forward(self, x):
        e = self.tok(x[:, :T]) + self.tok(x[:, T:])  # source and target share the table
        return self.out(bg.sum(bg.tanh(self.fc(e)), 1))


MODELS = {"shared_module": SharedModule, "tied_head": TiedHead, "shared_embedding": SharedEmbedding}


def make(name, seed=0):
    bg.manual_seed(seed)
    return MODELS[name]()


def batch(name, n=128, seed=1):
    r = np.random.RandomState(seed)
    if name == "shared_module":
        x = bg.tensor(r.randn(n, D).astype(np.float32))
        y = bg.tensor(r.randint(0, 5, size=n).astype(np.int64))
    elif name == "tied_head":
        x = bg.tensor(r.randint(0, V, size=(n, T)).astype(np.int64))
        y = bg.tensor(r.randint(0, V, size=n).astype(np.int64))
    else:
        x = bg.tensor(r.randint(0, V, size=(n, 2 * T)).astype(np.int64))
        y = bg.tensor(r.randint(0, 5, size=n).astype(np.int64))
    return x, y


def xent_sum(model):
    return lambda x, y, row: bg.cross_entropy(model(x), y, reduction="sum")


def main(name, steps=2):
    from bitgrad import distributed as dist
    model = make(name)
    opt = bg.optim.SGD(model, lr=0.1, momentum=0.9)
    dp = dist.DataParallel(model, 128)
    for s in range(steps):
        opt.zero_grad()
        dp.step(batch(name, seed=10 + s), xent_sum(model))
        opt.step()
    if dist.is_root():
        print("whole_batch %s" % dp.whole_batch)
        print("fingerprint %s" % bg.fingerprint(model))


if __name__ == "__main__":
    main(sys.argv[1])
