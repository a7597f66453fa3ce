"""A training loop written in Python: Fashion-MNIST, an MLP with dropout, SGD with momentum and a
cosine schedule, evaluation under no_grad, and the final fingerprint.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/custom_loop.py --threads 2 --workers 3

The loop is trained once with the settings given, then again with other thread and worker counts
(unless --no-check): the fingerprints agree, because neither setting can change a result.
"""
import argparse

import bitgrad as bg
from bitgrad import nn, optim

SEED = 20261121


def build_model():
    # Sequential(..., seed=) draws every parameter from (seed, "init") as `bitgrad train` does
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1, layer_id=0),
        nn.Linear(256, 10),
        seed=SEED)


def evaluate(model, test_set, workers):
    correct = total = 0
    loss_sum = 0.0
    with bg.no_grad():  # no graph is recorded
        for batch in bg.data.DataLoader(test_set, 1000, shuffle=False, drop_last=False, workers=workers):
            logits = model(batch.x)  # no Context: evaluation mode (dropout off)
            loss_sum += bg.cross_entropy(logits, batch.y, reduction="sum").item()
            correct += int((logits.argmax(1).numpy() == batch.y.numpy()).sum())
            total += batch.rows
    return correct / total, loss_sum / total


def train(steps, threads, workers, log=True):
    bg.set_num_threads(threads)
    train_set = bg.data.fashion_mnist(train=True)
    test_set = bg.data.fashion_mnist(train=False)
    loader = bg.data.DataLoader(train_set, 128, shuffle=True, workers=workers, seed=SEED)

    model = build_model()
    schedule = optim.Schedule("cosine", lr=0.05, total_steps=steps)
    opt = optim.SGD(model, momentum=0.9, schedule=schedule)

    for step in range(steps):
        batch = loader.next()  # batch k of an epoch is the same whoever builds it
        # training mode; the seed and step key the dropout masks
        ctx = nn.Context(training=True, seed=SEED, step=step)
        loss = bg.cross_entropy(model(batch.x, ctx), batch.y)
        opt.zero_grad()
        loss.backward()
        opt.step()  # at the schedule's rate for this step
        if log and (step + 1) % max(1, steps // 5) == 0:
            print(f"  step {step + 1:4d}  epoch {batch.epoch}  loss {loss.item():.6f}  lr {schedule(step):.5f}")

    accuracy, test_loss = evaluate(model, test_set, workers)
    return bg.fingerprint(model), accuracy, test_loss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--threads", type=int, default=bg.get_num_threads())
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-check", action="store_true", help="skip the second run with other settings")
    args = p.parse_args()

    print(f"training {args.steps} steps on {args.threads} thread(s) with {args.workers} loader worker(s)")
    fp, acc, test_loss = train(args.steps, args.threads, args.workers)
    print(f"test accuracy {100 * acc:.2f}%  test loss {test_loss:.6f}")
    print(f"fingerprint {fp}")

    if not args.no_check:
        threads2 = 1 if args.threads != 1 else 2
        workers2 = 0 if args.workers != 0 else 3
        print(f"\nagain on {threads2} thread(s) with {workers2} loader worker(s)")
        fp2, acc2, test_loss2 = train(args.steps, threads2, workers2, log=False)
        print(f"test accuracy {100 * acc2:.2f}%  test loss {test_loss2:.6f}")
        print(f"fingerprint {fp2}")
        print("identical" if fp2 == fp else "DIFFERENT: please report this as a bug")


if __name__ == "__main__":
    main()
