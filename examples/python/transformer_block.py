"""A PyTorch user's transformer block: causal multi-head self-attention written with matmul and a
causal mask held as a non-persistent buffer, LayerNorm, a GELU MLP and dropout, as an
nn.Module; trained to continue a repeating token pattern.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/transformer_block.py --steps 120
"""
import argparse
import math

import numpy as np

import bitgrad as bg
from bitgrad import nn, optim


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_head, block, p):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(p)
        # 1 above the diagonal: the positions a query may not see
        self.register_buffer("mask", bg.cast(bg.triu(bg.ones(block, block), 1), bg.uint8), persistent=False)

    def forward(self, x):
        n, t, d = x.shape
        h = self.n_head
        q, k, v = bg.split(self.qkv(x), d, dim=-1)
        q, k, v = (z.reshape(n, t, h, d // h).transpose(1, 2) for z in (q, k, v))   # [N, H, T, D/H]
        att = (q @ k.mT) * (1.0 / math.sqrt(d // h))
        att = bg.masked_fill(att, self.mask[:t, :t], float("-inf"))
        att = self.drop(bg.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(n, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, n_head, block, p=0.1):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, n_head, block, p)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=32, n_head=4, block=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(bg.randn(block, dim) * 0.02)
        self.block = Block(dim, n_head, block)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        return self.head(self.ln(self.block(self.tok(idx) + self.pos[:t])))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=120)
    args = p.parse_args()
    vocab, block = 8, 16
    pattern = np.array([0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3, 2, 1], dtype=np.int64)
    seq = np.tile(pattern, 40)
    bg.manual_seed(4)
    model = TinyLM(vocab, block=block)
    print("state:", list(model.state_dict())[:6], "... (the mask is a non-persistent buffer: not saved)")
    opt = optim.AdamW(model, lr=3e-3, weight_decay=0.01)
    for step in range(args.steps):
        starts = (bg.rand(16, seed=4, stream=step).numpy() * (len(seq) - block - 1)).astype(np.int64)
        x = bg.tensor(np.stack([seq[s:s + block] for s in starts]))
        y = bg.tensor(np.stack([seq[s + 1:s + block + 1] for s in starts]))
        loss = bg.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % max(1, args.steps // 3) == 0:
            print(f"  step {step + 1:4d}  loss {loss.item():.4f}")
    model.eval()
    with bg.no_grad():
        x = bg.tensor(seq[None, 3:3 + block])
        pred = model(x).argmax(-1).numpy()[0]
    accuracy = float((pred == seq[4:4 + block]).mean())
    print(f"next-token accuracy on one window {100 * accuracy:.0f}%")
    print("fingerprint", bg.fingerprint(model))


if __name__ == "__main__":
    main()
