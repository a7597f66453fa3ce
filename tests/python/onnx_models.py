"""The three PyTorch models of the ONNX round trips (tests/python/test_onnx_roundtrip.py,
`make onnx-roundtrip`), small enough for ctest: torchvision's ResNet-18 (num_classes=10, 32x32
inputs), a TransformerEncoder language model with a causal mask, an LSTM language model; and
what both libraries need to train them the same way: the export, the batches, the loss."""
import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as F

import bitgrad as bg

VOCAB, SEQ = 16, 6


class TransformerLM(tnn.Module):
    """Token embedding + learned positions, a causal TransformerEncoder (post-norm, ReLU), a head."""

    def __init__(self, vocab=VOCAB, dim=8, heads=2, layers=2, seq=SEQ):
        super().__init__()
        self.emb = tnn.Embedding(vocab, dim)
        self.pos = tnn.Parameter(torch.randn(seq, dim) * 0.1)
        layer = tnn.TransformerEncoderLayer(dim, heads, 16, dropout=0.0, batch_first=True)
        self.enc = tnn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = tnn.Linear(dim, vocab)

    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.head(self.enc(self.emb(x) + self.pos[:t], mask=mask))


class LstmLM(tnn.Module):
    def __init__(self, vocab=VOCAB, dim=8, hidden=12):
        super().__init__()
        self.emb = tnn.Embedding(vocab, dim)
        self.lstm = tnn.LSTM(dim, hidden, batch_first=True)
        self.head = tnn.Linear(hidden, vocab)

    def forward(self, x):
        y, _ = self.lstm(self.emb(x))
        return self.head(y)


def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def make(kind, seed=0, batch=8, double=False):
    """(torch module in training mode, an example input, batches(n) -> [(x, y)] as numpy); double: the
    module and its float inputs in float64"""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    if kind == "resnet18":
        m = resnet18()
        example = torch.randn(batch, 3, 32, 32)

        def batches(n):
            return [(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, batch)) for _ in range(n)]
    else:
        m = TransformerLM() if kind == "transformer" else LstmLM()
        example = torch.randint(0, VOCAB, (2, SEQ))

        def batches(n):
            out = []
            for _ in range(n):
                s = rng.integers(0, VOCAB, (2, SEQ + 1))
                out.append((s[:, :-1], s[:, 1:]))
            return out
    m.train()
    if double:
        m = m.double()
        example = example.double() if example.is_floating_point() else example
        make_f32 = batches

        def batches(n):
            return [(x.astype(np.float64) if x.dtype == np.float32 else x, y) for x, y in make_f32(n)]
    return m, example, batches


def export(m, example, path):
    """torch.onnx.export in training mode (BatchNorm's batch statistics, Dropout kept, no constant
    folding: the parameters stay initializers under their state_dict names), opset 17."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, example, path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["output"])


def torch_loss(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), torch.as_tensor(y).reshape(-1))


def bg_input(x):
    return bg.tensor(np.ascontiguousarray(x), dtype=bg.int64 if x.dtype.kind == "i" else bg.float64 if x.dtype == np.float64 else bg.float32)


def bg_loss(out, y):
    logits = bg.reshape(out, [-1, out.shape[-1]])
    return bg.cross_entropy(logits, bg.tensor(np.asarray(y).reshape(-1).astype(np.int64), dtype=bg.int64))


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
