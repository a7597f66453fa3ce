#!/usr/bin/python3
"""Golden values of a tiny GPT from PyTorch (Debian python3-torch) in f64: the loss and the
gradient of every parameter, for tests/nn/transformer_test.cpp.

The model is bitgrad's (src/nn/transformer.cpp): token + position embedding, pre-norm blocks
x + attn(ln1(x)), h + mlp(ln2(h)) with exact GELU, final layer norm, an untied head without
bias; the loss is the cross-entropy per position, averaged per sequence, then over the batch.
The weights are float32 values (bitgrad's model is f32) written with 9 significant digits, so
both sides start from the same numbers.

Usage: /usr/bin/python3 tests/golden/gen_gpt_golden.py > tests/golden/tiny_gpt.json
"""
import json
import math

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(20261123)
V, T, D, H, L, N = 7, 5, 8, 2, 2, 3

names = []
params = {}


def p(name, shape, scale=0.3, base=None):
    v = rng.uniform(-scale, scale, size=shape).astype(np.float32) if base is None else (base + rng.uniform(-0.1, 0.1, size=shape)).astype(np.float32)
    params[name] = torch.tensor(v.astype(np.float64), requires_grad=True)
    names.append(name)


p("0.wte", (V, D))
p("0.wpe", (T, D))
for b in range(1, L + 1):
    p(f"{b}.ln1.gamma", (D,), base=1.0)
    p(f"{b}.ln1.beta", (D,))
    p(f"{b}.attn_qkv.weight", (3 * D, D))
    p(f"{b}.attn_qkv.bias", (3 * D,))
    p(f"{b}.attn_proj.weight", (D, D))
    p(f"{b}.attn_proj.bias", (D,))
    p(f"{b}.ln2.gamma", (D,), base=1.0)
    p(f"{b}.ln2.beta", (D,))
    p(f"{b}.mlp_fc.weight", (4 * D, D))
    p(f"{b}.mlp_fc.bias", (4 * D,))
    p(f"{b}.mlp_proj.weight", (D, 4 * D))
    p(f"{b}.mlp_proj.bias", (D,))
p(f"{L + 1}.gamma", (D,), base=1.0)
p(f"{L + 1}.beta", (D,))
p(f"{L + 2}.weight", (V, D))

x = rng.integers(0, V, size=(N, T))
x[0, :3] = [4, 4, 4]  # repeated ids: the embedding's gradient sums them
y = rng.integers(0, V, size=(N, T))
P = params
ln = torch.nn.functional.layer_norm


def block(h, b):
    a = ln(h, (D,), P[f"{b}.ln1.gamma"], P[f"{b}.ln1.beta"], 1e-5)
    qkv = a @ P[f"{b}.attn_qkv.weight"].T + P[f"{b}.attn_qkv.bias"]
    q, k, v = qkv.split(D, dim=2)
    q, k, v = [t.view(N, T, H, D // H).transpose(1, 2) for t in (q, k, v)]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
    att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf")).softmax(-1)
    o = (att @ v).transpose(1, 2).contiguous().view(N, T, D)
    h = h + o @ P[f"{b}.attn_proj.weight"].T + P[f"{b}.attn_proj.bias"]
    m = ln(h, (D,), P[f"{b}.ln2.gamma"], P[f"{b}.ln2.beta"], 1e-5)
    m = torch.nn.functional.gelu(m @ P[f"{b}.mlp_fc.weight"].T + P[f"{b}.mlp_fc.bias"])
    return h + m @ P[f"{b}.mlp_proj.weight"].T + P[f"{b}.mlp_proj.bias"]


h = P["0.wte"][torch.tensor(x)] + P["0.wpe"][:T]
for b in range(1, L + 1):
    h = block(h, b)
h = ln(h, (D,), P[f"{L + 1}.gamma"], P[f"{L + 1}.beta"], 1e-5)
logits = h @ P[f"{L + 2}.weight"].T
loss = torch.nn.functional.cross_entropy(logits.reshape(N * T, V), torch.tensor(y).reshape(N * T))
loss.backward()

out = {
    "sizes": {"vocab": V, "block": T, "dim": D, "heads": H, "layers": L, "batch": N},
    "x": x.tolist(),
    "y": y.tolist(),
    "loss": loss.item(),
    "params": [{"name": n, "shape": list(P[n].shape), "value": [float("%.9g" % v) for v in P[n].detach().reshape(-1).tolist()],
                "grad": P[n].grad.reshape(-1).tolist()} for n in names],
}
print(json.dumps(out))
