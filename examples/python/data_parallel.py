"""Data parallel from a Python training loop: the same fingerprint on any number of ranks.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/data_parallel.py
    PYTHONPATH=build/python mpirun -n 4 /usr/bin/python3 examples/python/data_parallel.py --threads 1

Every rank builds the same model (keyed seeds), loads only its shard of each batch, computes the
gradients of its nodes of the batch's tree; the combine evaluates the tree over all ranks' nodes,
so every rank holds the gradient one process computes and makes the same update. Rank 0 prints
and writes the checkpoint; `--resume` continues a run on any number of ranks.

The model is a function of its own (build_model): the MLP is a C++ Sequential, the CNN a Python
nn.Module subclass; swap in any module, as long as every rank builds it alike (keyed seeds:
`bitgrad.manual_seed` before it is made).
"""
import argparse

import bitgrad as bg
from bitgrad import distributed as dist
from bitgrad import nn, optim

SEED = 20261124


def build_model(kind, sample_shape, classes):
    if kind == "mlp":
        features = 1
        for d in sample_shape:
            features *= d
        return nn.Sequential(nn.Flatten(), nn.Linear(features, 64), nn.Tanh(), nn.Dropout(0.1, layer_id=0),
                             nn.Linear(64, classes), seed=SEED)
    bg.manual_seed(SEED)  # every rank: the same program seed, so the same keyed initial weights
    return CNN(sample_shape, classes)


class CNN(nn.Module):
    """The CNN as a PyTorch user writes it: a Python-defined module."""

    def __init__(self, sample_shape, classes):
        super().__init__()
        c, h, w = sample_shape
        self.conv1 = nn.Conv2d(c, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(8 * (h // 4) * (w // 4), classes)

    def forward(self, x):
        x = self.pool(bg.relu(self.conv1(x)))
        x = self.pool(bg.relu(self.conv2(x)))
        return self.fc(self.drop(bg.flatten(x, 1)))


def dataset(name):
    if name == "fashion":
        return bg.data.fashion_mnist(train=True)
    return bg.data.synthetic(2000, [1, 12, 12], classes=10, seed=SEED)


def fingerprint(model, opt):
    """Parameters, the optimizer's buffers and its step count, as `bitgrad train` fingerprints a run."""
    state = opt.state_dict()
    return bg.fingerprint(list(model.named_parameters()) + sorted((k, v) for k, v in state.items() if k != "steps")
                          + [("steps", bg.tensor([state["steps"]]))])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--data", choices=["fashion", "synthetic"], default="synthetic")
    p.add_argument("--total-steps", type=int, default=30, help="the run's length (the schedule's)")
    p.add_argument("--steps", type=int, help="stop after this step (default: --total-steps)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="kernel threads per rank (0: as set)")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--save", help="write a checkpoint here at the end (rank 0)")
    p.add_argument("--resume", help="continue from this checkpoint (written on any number of ranks)")
    p.add_argument("--replica-check", type=int, default=10, help="compare the ranks' state every N steps")
    args = p.parse_args()
    if args.steps is None:
        args.steps = args.total_steps

    world = dist.init()                       # MPI under mpirun (as `bitgrad train`); one rank otherwise
    if args.threads:
        bg.set_num_threads(args.threads)
    train_set = dataset(args.data)
    model = build_model(args.model, train_set.sample_shape, train_set.num_classes)
    schedule = optim.Schedule("cosine", lr=0.05, total_steps=args.total_steps)
    opt = optim.SGD(model, momentum=0.9, schedule=schedule)

    dp = dist.DataParallel(model, args.batch_size, accumulate=args.accumulate)
    loader = dp.loader(train_set, seed=SEED, workers=args.workers)   # this rank's shard of every batch
    start = 0
    if args.resume:
        start = dist.load(args.resume, model, opt, loader)["step"]
    if dist.is_root():
        print(f"{world} rank(s); a batch of {args.batch_size}: {dp.plan()}")
        if start:
            print(f"resumed at step {start}")

    for step in range(start, args.steps):
        batch = loader.next()

        def loss_sum(x, y, row):          # summed over the piece; `row` keys dropout by sample
            if isinstance(model, CNN):    # a Python module: the context its C++ layers take
                with nn.context(seed=SEED, step=step, row_offset=row):
                    return bg.cross_entropy(model(x), y, reduction="sum")
            ctx = nn.Context(training=True, seed=SEED, step=step, row_offset=row)
            return bg.cross_entropy(model(x, ctx), y, reduction="sum")

        opt.zero_grad()
        loss = dp.step(batch, loss_sum)   # the batch's gradient in .grad on every rank
        opt.step()
        if (step + 1) % args.replica_check == 0 or step + 1 == args.steps:
            dp.check_replicas(opt, loader, step=step + 1)
        if dist.is_root() and ((step + 1) % max(1, args.total_steps // 5) == 0 or step + 1 == args.steps):
            print(f"  step {step + 1:4d}  loss {loss.item():.6f}")

    if args.save:
        dist.save(args.save, model, opt, loader, step=args.steps)
    if dist.is_root():
        print(f"fingerprint {fingerprint(model, opt)}")


if __name__ == "__main__":
    main()
