"""A PyTorch user's character-level LSTM language model: Embedding, the built-in nn.LSTM, a Linear
head, trained on a small text with truncated sequences, then sampled greedily.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/char_lstm.py --steps 150
"""
import argparse

import numpy as np

import bitgrad as bg
from bitgrad import nn, optim

TEXT = ("the quick brown fox jumps over the lazy dog. " * 4 +
        "a reproducible result is one whose every bit can be derived again. " * 4)


class CharLSTM(nn.Module):
    def __init__(self, vocab, dim=32, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):                      # x: int64 [N, T]
        h, _ = self.lstm(self.embed(x))        # [N, T, hidden], as PyTorch: (output, (h_n, c_n))
        return self.head(h)                    # [N, T, vocab]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150)
    args = p.parse_args()
    chars = sorted(set(TEXT))
    ids = np.array([chars.index(c) for c in TEXT], dtype=np.int64)
    block, batch = 24, 16
    bg.manual_seed(3)
    model = CharLSTM(len(chars))
    opt = optim.Adam(model, lr=0.01)
    for step in range(args.steps):
        # batch `step` is a function of the step alone: starts drawn from a keyed stream
        starts = (bg.rand(batch, seed=3, stream=step).numpy() * (len(ids) - block - 1)).astype(np.int64)
        x = bg.tensor(np.stack([ids[s:s + block] for s in starts]))
        y = bg.tensor(np.stack([ids[s + 1:s + block + 1] for s in starts]))
        loss = bg.cross_entropy(model(x), y)   # logits [N, T, C], targets [N, T]
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % max(1, args.steps // 3) == 0:
            print(f"  step {step + 1:4d}  loss {loss.item():.4f}")
    model.eval()
    out = "the "
    with bg.no_grad():
        for _ in range(40):
            x = bg.tensor(np.array([[chars.index(c) for c in out[-block:]]], dtype=np.int64))
            out += chars[int(model(x)[0, -1].argmax(0).item())]
    print("sample:", repr(out))
    print("fingerprint", bg.fingerprint(model))


if __name__ == "__main__":
    main()
