"""A PyTorch user's regression with the Huber loss, saved as safetensors and loaded into the
equivalent torch module with load_state_dict(strict=True): the same outputs to 1e-6.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/huber_regression.py

The file is plain safetensors (bitgrad adds its checksum to the metadata); it is read here with
NumPy, since Debian's PyTorch has no safetensors reader.
"""
import argparse
import json
import os
import struct
import tempfile

import numpy as np

import bitgrad as bg
from bitgrad import nn, optim


class Regressor(nn.Module):
    def __init__(self, d_in=5, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.norm = nn.LayerNorm(d_in)

    def forward(self, x):
        return self.net(self.norm(x))


def read_safetensors(path):
    """name -> NumPy array, in the file's order."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    types = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=types[e["dtype"]]).reshape(e["shape"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    bg.manual_seed(5)
    x = bg.randn(256, 5)
    w = bg.tensor([[1.5], [-2.0], [0.5], [0.0], [3.0]])
    noise = bg.randn(256, 1) * 0.1
    y = x @ w + noise
    model = Regressor()
    opt = optim.Adam(model, lr=0.01)
    for step in range(args.steps):
        loss = bg.huber_loss(model(x), y, delta=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"huber loss after {args.steps} steps: {loss.item():.6f}")

    import torch

    class TorchRegressor(torch.nn.Module):
        def __init__(self, d_in=5, hidden=16):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
            self.norm = torch.nn.LayerNorm(d_in)

        def forward(self, x):
            return self.net(self.norm(x))

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "regressor.safetensors")
        bg.io.save_safetensors(path, model.state_dict())
        arrays = read_safetensors(path)
    print("keys:", list(arrays))
    tmodel = TorchRegressor()
    tmodel.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in arrays.items()}, strict=True)
    model.eval()
    with bg.no_grad():
        ours = model(x).numpy()
    with torch.no_grad():
        theirs = tmodel(torch.from_numpy(x.numpy().copy())).numpy()
    err = float(np.abs(ours - theirs).max())
    print(f"max |bitgrad - torch| over 256 outputs: {err:.3g}")
    assert err <= 1e-6, err
    print("same outputs to 1e-6")


if __name__ == "__main__":
    main()
