"""Per-call overhead of a small op from Python: bitgrad against PyTorch, in one process.

Each case is timed in NUMBER-call loops, REPEAT times; the median per call is reported with the
ratio to torch's. Run: PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py
(or `make bench-python`)."""
import os
import statistics
import sys
import timeit

import numpy as np

import bitgrad as bg

NUMBER = int(os.environ.get("NUMBER", "20000"))
REPEAT = int(os.environ.get("REPEAT", "15"))


def median_us(stmt, env):
    t = timeit.repeat(stmt, globals=env, number=NUMBER, repeat=REPEAT)
    return statistics.median(t) / NUMBER * 1e6


def cpu_line():
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                fields.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return "%s (family %s, model %s)" % (fields.get("model name", bg.cpu_model()), fields.get("cpu family", "?"), fields.get("model", "?"))


def main():
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    bg.set_num_threads(1)
    a, b = bg.ones(1), bg.ones(1)
    g = bg.ones(1, requires_grad=True)
    env = {"bg": bg, "a": a, "b": b, "g": g, "np": np, "arr": np.ones(4, np.float32)}
    cases = [
        ("a + b (1 element)", "a + b", "ta + tb"),
        ("relu(a)", "bg.relu(a)", "torch.relu(ta)"),
        ("a * 2.0", "a * 2.0", "ta * 2.0"),
        ("g * b (records a node)", "g * b", "tg * tb"),
        ("x.sum() (1 element)", "a.sum()", "ta.sum()"),
        ("from_numpy (4 elements)", "bg.from_numpy(arr)", "torch.from_numpy(arr)"),
        (".shape", "a.shape", "ta.shape"),
    ]
    if torch:
        env.update(torch=torch, ta=torch.ones(1), tb=torch.ones(1), tg=torch.ones(1, requires_grad=True))
    print("cpu: %s; bitgrad %s (%s); torch %s; %d x %d calls, median" % (
        cpu_line(), bg.__version__, bg.get_isa(), torch.__version__ if torch else "absent", REPEAT, NUMBER))
    print("| call | bitgrad µs | torch µs | ratio |")
    print("|---|---|---|---|")
    for name, ours, theirs in cases:
        u = median_us(ours, env)
        if torch:
            t = median_us(theirs, env)
            print("| %s | %.2f | %.2f | %.2f |" % (name, u, t, u / t))
        else:
            print("| %s | %.2f | - | - |" % (name, u))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
