#!/usr/bin/python3
"""Logit rows of the PyTorch baseline (bench/serve_torch.py's model and batching) computed in a
padded batch against the same windows alone: how many rows differ in any bit. The serving
benchmark counts differing responses (tokens); this counts the logits under them.

  serve_torch_rows.py RUN [--windows 64] [--threads 1 2]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_torch import Engine  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    import torch
    eng = Engine(a.run, 1, a.windows)
    r = random.Random(7)
    V = len(eng.symbols)
    wins = [[r.randrange(V) for _ in range(r.randrange(1, eng.block + 1))] for _ in range(a.windows)]
    for t in a.threads:
        torch.set_num_threads(t)
        T = max(len(w) for w in wins)
        idx = torch.zeros(len(wins), T, dtype=torch.long)
        for b, w in enumerate(wins):
            idx[b, :len(w)] = torch.tensor(w)
        with torch.no_grad():
            batch = eng.model(idx)
            differ = 0
            for b, w in enumerate(wins):
                alone = eng.model(torch.tensor([w]))[0, len(w) - 1]
                differ += int(not torch.equal(batch[b, len(w) - 1], alone))
        print("threads %d: %d of %d logit rows differ between the padded batch and alone" % (t, differ, len(wins)), flush=True)


if __name__ == "__main__":
    main()
