#!/usr/bin/python3
"""How far a float32 training run drifts from its float64 twin (docs/numerics.md, the accuracy
table's step rows): bitgrad's own twin (`bitgrad train --shadow f64`: the same starting weights,
batches and schedule in f64, the relative parameter distance ||p - p64|| / ||p64|| after every
step) beside PyTorch's (the MLP and CNN of bench/peer_torch.py trained in float32 and in float64
from the same initial weights on the same batches, the same distance over all parameters).

  /usr/bin/python3 bench/step_accuracy.py [--bitgrad build/bin/bitgrad ...] [--steps 100]

Several --bitgrad binaries (e.g. two numerics versions) are measured side by side. Prints a
markdown table; the distance after the last step, and its largest value over the steps.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_torch  # noqa: E402

CONFIGS = {"mlp": "examples/fashion_mlp.toml", "cnn": "examples/fashion_cnn.toml", "gpt": "examples/fortunes_gpt.toml"}


def bitgrad_drift(exe, model, steps):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run")
        subprocess.run([exe, "train", CONFIGS[model], "--shadow", "f64", "--steps", str(steps), "--out", out, "--threads", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        dist = [json.loads(line)["shadow"]["distance"] for line in open(os.path.join(out, "metrics.jsonl")) if '"shadow"' in line]
    return float(dist[-1]), max(float(x) for x in dist)


def torch_drift(model, steps):
    torch.manual_seed(0)
    net32 = peer_torch.cnn() if model == "cnn" else peer_torch.mlp(512)
    net64 = (peer_torch.cnn() if model == "cnn" else peer_torch.mlp(512)).double()
    net64.load_state_dict({k: v.double() for k, v in net32.state_dict().items()})
    x_all, y_all = peer_torch.fashion("nchw" if model == "cnn" else "flat")
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(x_all.shape[0], generator=g)
    opts = [torch.optim.SGD(n.parameters(), lr=0.05, momentum=0.9) for n in (net32, net64)]
    dists = []
    for step in range(steps):
        idx = perm[step * 128:(step + 1) * 128]
        for net, opt, dt in ((net32, opts[0], torch.float32), (net64, opts[1], torch.float64)):
            loss = F.cross_entropy(net(x_all[idx].to(dt)), y_all[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        num = sum(float(((a.double() - b) ** 2).sum()) for a, b in zip(net32.parameters(), net64.parameters()))
        den = sum(float((b ** 2).sum()) for b in net64.parameters())
        dists.append((num / den) ** 0.5)
    return dists[-1], max(dists)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bitgrad", action="append", default=[])
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    exes = a.bitgrad or ["build/bin/bitgrad"]
    torch.set_num_threads(1)
    names = []
    for exe in exes:
        v = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[0]
        names.append(v)
    print(f"float32 against the float64 twin after {a.steps} steps: ||p - p64|| / ||p64|| at the last step (the largest over the steps)\n")
    print("| model | " + " | ".join(names) + " | PyTorch " + torch.__version__ + " |")
    print("|---|" + "---|" * (len(names) + 1))
    for model in ("mlp", "cnn", "gpt"):
        cells = ["%.2e (%.2e)" % bitgrad_drift(exe, model, a.steps) for exe in exes]
        cells.append("%.2e (%.2e)" % torch_drift(model, a.steps) if model != "gpt" else "–")
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
