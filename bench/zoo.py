"""The zoo benchmark (make bench-zoo; docs/benchmarks.md): one training step (forward, backward,
optimizer) of models users bring, bitgrad against PyTorch 1.13 eager on the same weights and
batches, at 1 and 2 threads. Rounds interleave the two sides; each figure is the median of the
rounds' median step times. Each row also gives the step's FMA-bound limit: its multiply-adds
(the products of the GEMMs and convolutions, forward and both gradients, counted by hooks on the
torch model) over the FMA peak of the threads, and both sides' time as a multiple of it.

  python3 bench/zoo.py [--models a,b] [--threads 1,2] [--rounds 3] [--steps 10] [--peak GFLOPS] [--phases]
  models: lstm_seq, lstm_classifier, gru_classifier, resnet18, mobilenet_v2, shufflenet_v2, efficientnet_b0 (the CNNs
  through ONNX), transformer_lm (torch's TransformerEncoder through ONNX; its FMA bound counts the Linear modules
  only, not the attention's in-projection and products); ex_cnn_batchnorm, ex_mlp_dropout, ex_resnet_block,
  ex_char_lstm, ex_transformer_block, ex_huber_regression (the models of examples/python, imported from there, at
  the examples' sizes, beside torch twins of the same state_dict keys); cnn_bn (a CIFAR CNN with batch norm and
  dropout, b64 3×32×32) and transformer_py (a 2-block char LM of dim 128 built from examples/python's attention,
  b64 T16), Python modules on both sides. The attention models' FMA bounds count the Linear modules only, not the
  attention products.

Each Python-module row checks once, untimed, that the two sides' first loss and outputs agree (dropout off) to
1e-4 relative, else the row is an error saying the twins disagree; in the timed steps the two sides' dropout
draws different masks of the same p.

A model that bitgrad cannot take (an ONNX op it does not import) is a row with the reason.
Each thread count runs in a process of its own with OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set
(Debian's torch computes its GEMMs in OpenBLAS, which reads its thread count when loaded and
ignores torch.set_num_threads).
"""
import argparse
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import bitgrad as bg

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the models: torch's, and bitgrad's of the same weights ------------------------------------

class TorchRecurrentClassifier(torch.nn.Module):
    def __init__(self, cell, vocab=128, dim=64, hidden=256, classes=10):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.rnn = cell(dim, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.head(h[:, -1])


class BgRecurrentClassifier(bg.nn.Module):
    def __init__(self, cell, vocab=128, dim=64, hidden=256, classes=10):
        super().__init__()
        self.embed = bg.nn.Embedding(vocab, dim)
        self.rnn = cell(dim, hidden, batch_first=True)
        self.head = bg.nn.Linear(hidden, classes)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.head(h[:, -1])


# ---- examples/python's models, imported as their authors wrote them, and torch twins -----------
# A twin has the example's state_dict keys and its math (torch's Conv2d, BatchNorm2d, LSTM, ...),
# so the example's weights are the torch model's, copied by key.

EXAMPLES = os.path.join(HERE, "..", "examples", "python")


def example(name):
    """The module examples/python/<name>.py."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.import_module(name)


class TorchCNN(torch.nn.Module):  # cnn_batchnorm.CNN
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


class TorchMLP(torch.nn.Module):  # mlp_dropout.MLP
    def __init__(self, hidden=128, p=0.2):
        super().__init__()
        self.flatten = torch.nn.Flatten()
        self.fc1 = torch.nn.Linear(784, hidden)
        self.drop1 = torch.nn.Dropout(p)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.drop2 = torch.nn.Dropout(p)
        self.out = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        x = self.drop1(F.relu(self.fc1(self.flatten(x))))
        x = self.drop2(F.relu(self.fc2(x)))
        return self.out(x)


class TorchBasicBlock(torch.nn.Module):  # resnet_block.BasicBlock
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + skip)


class TorchResNet(torch.nn.Module):  # resnet_block.ResNet (recompute=False)
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.blocks = torch.nn.ModuleList([TorchBasicBlock(8, 8), TorchBasicBlock(8, 16, stride=2)])
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.fc(torch.flatten(self.pool(x), 1))


class TorchCharLSTM(torch.nn.Module):  # char_lstm.CharLSTM
    def __init__(self, vocab, dim=32, hidden=64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.lstm = torch.nn.LSTM(dim, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.head(h)


class TorchCausalSelfAttention(torch.nn.Module):  # transformer_block.CausalSelfAttention
    def __init__(self, dim, n_head, block, p):
        super().__init__()
        self.n_head = n_head
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.drop = torch.nn.Dropout(p)
        self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1), persistent=False)

    def forward(self, x):
        n, t, d = x.shape
        h = self.n_head
        q, k, v = torch.split(self.qkv(x), d, dim=-1)
        q, k, v = (z.reshape(n, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.mT) * (1.0 / math.sqrt(d // h))
        att = att.masked_fill(self.mask[:t, :t], float("-inf"))
        att = self.drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(n, t, d)
        return self.proj(y)


class TorchBlock(torch.nn.Module):  # transformer_block.Block
    def __init__(self, dim, n_head, block, p=0.1):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(dim)
        self.attn = TorchCausalSelfAttention(dim, n_head, block, p)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim),
                                       torch.nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TorchTinyLM(torch.nn.Module):  # transformer_block.TinyLM
    def __init__(self, vocab, dim=32, n_head=4, block=16):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(block, dim) * 0.02)
        self.block = TorchBlock(dim, n_head, block)
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        return self.head(self.ln(self.block(self.tok(idx) + self.pos[:t])))


class TorchRegressor(torch.nn.Module):  # huber_regression.Regressor (the example's own twin)
    def __init__(self, d_in=5, hidden=16):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
        self.norm = torch.nn.LayerNorm(d_in)

    def forward(self, x):
        return self.net(self.norm(x))


# ---- larger Python modules: a CIFAR CNN with batch norm and dropout, a 2-block char LM ----------

class TorchCifarCNN(torch.nn.Module):
    def __init__(self, p=0.25):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32)
        self.conv2, self.bn2 = torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64)
        self.conv3, self.bn3 = torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.BatchNorm2d(128)
        self.pool = torch.nn.MaxPool2d(2)
        self.drop = torch.nn.Dropout(p)
        self.fc = torch.nn.Linear(128 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        x = self.pool(F.relu(self.bn3(self.conv3(x))))
        return self.fc(torch.flatten(self.drop(x), 1))


class BgCifarCNN(bg.nn.Module):
    def __init__(self, p=0.25):
        super().__init__()
        self.conv1, self.bn1 = bg.nn.Conv2d(3, 32, 3, padding=1), bg.nn.BatchNorm2d(32)
        self.conv2, self.bn2 = bg.nn.Conv2d(32, 64, 3, padding=1), bg.nn.BatchNorm2d(64)
        self.conv3, self.bn3 = bg.nn.Conv2d(64, 128, 3, padding=1), bg.nn.BatchNorm2d(128)
        self.pool = bg.nn.MaxPool2d(2)
        self.drop = bg.nn.Dropout(p)
        self.fc = bg.nn.Linear(128 * 8 * 8, 10)

    def forward(self, x):
        x = bg.relu(self.bn1(self.conv1(x)))
        x = self.pool(bg.relu(self.bn2(self.conv2(x))))
        x = self.pool(bg.relu(self.bn3(self.conv3(x))))
        return self.fc(bg.flatten(self.drop(x), 1))


class TorchCharLM(torch.nn.Module):
    """TinyLM with a stack of blocks."""

    def __init__(self, vocab, dim, n_head, block, layers):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(block, dim) * 0.02)
        self.blocks = torch.nn.ModuleList([TorchBlock(dim, n_head, block) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:idx.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def bg_char_lm(vocab, dim, n_head, block, layers):
    """TorchCharLM in bitgrad: a Python module around the blocks of examples/python/transformer_block.py
    (attention with split, reshape, transpose and masked_fill)."""
    tb = example("transformer_block")

    class CharLM(bg.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = bg.nn.Embedding(vocab, dim)
            self.pos = bg.nn.Parameter(bg.randn(block, dim) * 0.02)
            self.blocks = bg.nn.ModuleList([tb.Block(dim, n_head, block) for _ in range(layers)])
            self.ln = bg.nn.LayerNorm(dim)
            self.head = bg.nn.Linear(dim, vocab)

        def forward(self, idx):
            x = self.tok(idx) + self.pos[:idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    return CharLM()


def twin(make_bg):
    """make_bg() with the torch model's weights: Case's make_bg."""
    def make(tm):
        m = make_bg()
        copy_weights(tm, m)
        return m
    return make


def seq_ce_torch(out, y):  # logits [N, T, C] against targets [N*T]
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y)


def seq_ce_bg(out, y):
    return bg.cross_entropy(out.reshape(-1, out.shape[-1]), y)


def copy_weights(torch_model, bg_model):
    state = {k: bg.tensor(v.detach().numpy().copy()) for k, v in torch_model.state_dict().items()}
    bg_model.load_state_dict(state)


class Case:
    """A model on both sides: torch_step() and bitgrad_step() each run one training step."""

    def __init__(self, name, how, torch_model, batch, make_bg, torch_loss, bg_loss, lr=0.01, check=False):
        self.name, self.how, self.error = name, how, None
        self.t_model, self.batch = torch_model, batch
        self.t_opt = torch.optim.Adam(torch_model.parameters(), lr=lr)
        self.t_loss, self.b_loss = torch_loss, bg_loss
        self.flops = count_flops(torch_model, batch[0])
        self.first_loss = None
        try:
            self.b_model = make_bg(torch_model)
            self.b_opt = bg.optim.Adam(self.b_model.parameters(), lr=lr)
            self.b_batch = tuple(bg.tensor(t.numpy()) for t in batch)
            if check:
                self.first_loss = t, b, d = self.first_forward()
                # 1e-4 relative: ~800 f32 epsilons, room for sums in other orders (a few seen). The
                # outputs too: a loss near log(classes) at initialisation hides a wrong weight.
                if not (abs(t - b) <= 1e-4 * abs(t) and d <= 1e-4):
                    self.error = "the twins disagree: first loss torch %.7g, bitgrad %.7g; outputs %.2g apart" % (t, b, d)
        except Exception as e:  # the row says why
            self.error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])

    def first_forward(self):
        """Untimed: torch's first loss, bitgrad's, and the outputs' largest difference over their
        largest magnitude, with dropout off (the two sides draw different masks). The models stay in
        training mode, so batch norm normalises by the batch as in the timed steps; each Dropout is
        put in eval mode. A bitgrad Dropout inside an nn.Sequential follows the Sequential's mode,
        not its own, so that Sequential is put in eval mode instead (none here holds batch norm)."""
        off = [m for m in self.t_model.modules() if isinstance(m, torch.nn.Dropout)]
        off += [m for m in self.b_model.modules() if isinstance(m, bg.nn.Dropout) or (
            isinstance(m, bg.nn.Sequential) and any(isinstance(c, bg.nn.Dropout) for c in m.children()))]
        for m in off:
            m.eval()
        try:
            with torch.no_grad():
                t_out = self.t_model(self.batch[0])
                t = self.t_loss(t_out, self.batch[1]).item()
            with bg.no_grad():
                b_out = self.b_model(self.b_batch[0])
                b = self.b_loss(b_out, self.b_batch[1]).item()
        finally:
            for m in off:
                m.train()
        t_out = t_out.numpy()
        return t, b, float(abs(b_out.detach().numpy() - t_out).max() / abs(t_out).max())

    def torch_step(self):
        self.t_opt.zero_grad()
        loss = self.t_loss(self.t_model(self.batch[0]), self.batch[1])
        loss.backward()
        self.t_opt.step()

    def bitgrad_step(self):
        self.b_opt.zero_grad()
        loss = self.b_loss(self.b_model(self.b_batch[0]), self.b_batch[1])
        loss.backward()
        self.b_opt.step()

    def phases(self, side):
        """One step of `side` ("torch" or "bitgrad") timed in three parts: forward with the
        loss, backward, update (--phases)."""
        opt, model, loss_fn, batch = ((self.t_opt, self.t_model, self.t_loss, self.batch) if side == "torch" else
                                      (self.b_opt, self.b_model, self.b_loss, self.b_batch))
        opt.zero_grad()
        t0 = time.perf_counter()
        loss = loss_fn(model(batch[0]), batch[1])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        return t1 - t0, t2 - t1, time.perf_counter() - t2


def count_flops(model, x):
    """Multiply-adds of one training step ×2 (flops): the forward's GEMMs and convolutions, times
    3 for the step (forward, input gradient, weight gradient)."""
    total = [0]
    hooks = []

    def conv(m, inp, out):
        cin = m.in_channels // m.groups
        total[0] += 2 * out.numel() * cin * m.kernel_size[0] * m.kernel_size[1]

    def linear(m, inp, out):
        total[0] += 2 * out.numel() * m.in_features

    def rnn(m, inp, out):
        n, t = inp[0].shape[0], inp[0].shape[1]
        gates = {"LSTM": 4, "GRU": 3}.get(type(m).__name__, 1)
        total[0] += 2 * n * t * gates * m.hidden_size * (m.input_size + m.hidden_size)

    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv))
        elif isinstance(mod, torch.nn.Linear):
            hooks.append(mod.register_forward_hook(linear))
        elif isinstance(mod, (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)):
            hooks.append(mod.register_forward_hook(rnn))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return 3 * total[0]


class OnnxGraph:
    """An imported graph called as the other models are: in training mode, with its own step count."""

    def __init__(self, path):
        self.g, self.step = bg.onnx.load(path), 0

    def __call__(self, xb):
        self.step += 1
        return self.g(xb, bg.nn.Context(training=True, step=self.step))

    def parameters(self):
        return self.g.parameters()


def onnx_case(name, builder, batch_size, tmp):
    torch.manual_seed(0)
    model = builder()
    x = torch.randn(batch_size, 3, 32, 32)
    y = torch.randint(0, 10, (batch_size,))
    path = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=17)

    def bg_loss(out, target):
        return bg.cross_entropy(out, target)

    def make_bg(_):
        return OnnxGraph(path)

    return Case(name, "torchvision through ONNX", model, (x, y), make_bg, F.cross_entropy, bg_loss)


def build(name, tmp):
    torch.manual_seed(0)
    if name == "lstm_seq":
        class Seq(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(64, 256, batch_first=True)

            def forward(self, x):
                return self.lstm(x)[0]

        class BgSeq(bg.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = bg.nn.LSTM(64, 256, batch_first=True)

            def forward(self, x):
                return self.lstm(x)[0]

        def make(tm):
            m = BgSeq()
            copy_weights(tm, m)
            return m

        x, y = torch.randn(64, 32, 64), torch.randn(64, 32, 256)
        return Case(name, "nn.LSTM over a sequence (b64, T32, in 64, hidden 256), MSE", Seq(), (x, y), make,
                    F.mse_loss, bg.mse_loss)
    if name in ("lstm_classifier", "gru_classifier"):
        tcell, bcell = (torch.nn.LSTM, bg.nn.LSTM) if name == "lstm_classifier" else (torch.nn.GRU, bg.nn.GRU)
        tm = TorchRecurrentClassifier(tcell)

        def make(tm):
            m = BgRecurrentClassifier(bcell)
            copy_weights(tm, m)
            return m

        x, y = torch.randint(0, 128, (64, 32)), torch.randint(0, 10, (64,))
        return Case(name, "Embedding, %s 256, Linear (b64, T32), Adam" % tcell.__name__, tm, (x, y), make,
                    F.cross_entropy, bg.cross_entropy)
    if name in ("ex_cnn_batchnorm", "ex_mlp_dropout", "ex_resnet_block", "ex_char_lstm", "ex_transformer_block",
                "ex_huber_regression"):  # examples/python's models at the sizes of the examples' main()
        ex = example(name[3:])
        if name == "ex_cnn_batchnorm":
            x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
            return Case(name, "examples' CNN: 2 conv, BatchNorm2d, maxpool, Linear (b32 1×28×28)", TorchCNN(), (x, y),
                        twin(ex.CNN), F.cross_entropy, bg.cross_entropy, check=True)
        if name == "ex_mlp_dropout":
            x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
            return Case(name, "examples' MLP: 784-128-128-10, Dropout 0.2 (b64)", TorchMLP(), (x, y),
                        twin(ex.MLP), F.cross_entropy, bg.cross_entropy, check=True)
        if name == "ex_resnet_block":
            x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
            return Case(name, "examples' ResNet: stem, 2 BasicBlocks 8→16 (b32 1×28×28)", TorchResNet(), (x, y),
                        twin(ex.ResNet), F.cross_entropy, bg.cross_entropy, check=True)
        if name == "ex_char_lstm":
            vocab, block, batch = len(set(ex.TEXT)), 24, 16
            x, y = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch * block,))
            return Case(name, "examples' CharLSTM: Embedding 32, LSTM 64, Linear (vocab %d, b16 T24)" % vocab,
                        TorchCharLSTM(vocab), (x, y), twin(lambda: ex.CharLSTM(vocab)), seq_ce_torch, seq_ce_bg, check=True)
        if name == "ex_transformer_block":
            vocab, block, batch = 8, 16, 16
            x, y = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch * block,))
            return Case(name, "examples' TinyLM: 1 block, dim 32, 4 heads, Dropout 0.1 (vocab 8, b16 T16)",
                        TorchTinyLM(vocab, block=block), (x, y), twin(lambda: ex.TinyLM(vocab, block=block)),
                        seq_ce_torch, seq_ce_bg, check=True)
        if name == "ex_huber_regression":
            x = torch.randn(256, 5)
            y = x @ torch.tensor([[1.5], [-2.0], [0.5], [0.0], [3.0]]) + 0.1 * torch.randn(256, 1)
            return Case(name, "examples' Regressor: LayerNorm, 5-16-1 tanh MLP, Huber (b256)", TorchRegressor(), (x, y),
                        twin(ex.Regressor), lambda o, t: F.huber_loss(o, t, delta=1.0),
                        lambda o, t: bg.huber_loss(o, t, delta=1.0), check=True)
    if name == "cnn_bn":
        x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))
        return Case(name, "CNN (3 conv 32-64-128, BatchNorm2d, maxpool, Dropout 0.25) as a Python module (b64 3×32×32)",
                    TorchCifarCNN(), (x, y), twin(BgCifarCNN), F.cross_entropy, bg.cross_entropy, check=True)
    if name == "transformer_py":
        vocab, dim, heads, block, layers, batch = 96, 128, 4, 16, 2, 64
        x, y = torch.randint(0, vocab, (batch, block)), torch.randint(0, vocab, (batch * block,))
        return Case(name, "char LM of Python modules (attention with split/reshape/transpose/masked_fill; dim 128, "
                    "4 heads, 2 blocks, b64 T16)", TorchCharLM(vocab, dim, heads, block, layers), (x, y),
                    twin(lambda: bg_char_lm(vocab, dim, heads, block, layers)), seq_ce_torch, seq_ce_bg, check=True)
    import torchvision
    if name == "resnet18":
        return onnx_case(name, lambda: torchvision.models.resnet18(num_classes=10), 32, tmp)
    if name == "mobilenet_v2":
        return onnx_case(name, lambda: torchvision.models.mobilenet_v2(num_classes=10), 32, tmp)
    if name == "shufflenet_v2":
        return onnx_case(name, lambda: torchvision.models.shufflenet_v2_x1_0(num_classes=10), 32, tmp)
    if name == "transformer_lm":  # torch's TransformerEncoder as a causal char LM, through ONNX
        class LM(torch.nn.Module):
            def __init__(self, vocab=96, dim=128, heads=4, layers=2, T=32):
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, dim)
                self.pos = torch.nn.Parameter(torch.randn(T, dim) * 0.02)
                layer = torch.nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
                self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.head = torch.nn.Linear(dim, vocab)
                self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

            def forward(self, x):
                return self.head(self.enc(self.embed(x) + self.pos, mask=self.mask)).reshape(-1, 96)

        torch.manual_seed(0)
        model = LM()
        x = torch.randint(0, 96, (64, 32))
        y = torch.randint(0, 96, (64 * 32,))
        path = os.path.join(tmp, name + ".onnx")
        torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
        return Case(name, "TransformerEncoder char LM (dim 128, 2 layers, b64 T32) through ONNX", model, (x, y),
                    lambda _: OnnxGraph(path), F.cross_entropy, bg.cross_entropy)
    if name == "efficientnet_b0":  # stochastic depth off: a random layer drop has no ONNX form
        return onnx_case(name, lambda: torchvision.models.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.0), 32, tmp)
    raise SystemExit("zoo: unknown model %r" % name)


def time_steps(fn, steps):
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="lstm_seq,lstm_classifier,gru_classifier,resnet18,mobilenet_v2,shufflenet_v2,efficientnet_b0,"
                    "transformer_lm,ex_cnn_batchnorm,ex_mlp_dropout,ex_resnet_block,ex_char_lstm,ex_transformer_block,"
                    "ex_huber_regression,cnn_bn,transformer_py")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--peak", type=float, default=0.0, help="FMA peak per core, GFLOP/s (default: build/bin/fma_peak)")
    ap.add_argument("--json", default="")
    ap.add_argument("--side", default="both", choices=["both", "bitgrad", "torch"],
                    help="time one side alone (no ratio; for profiles: perf record ... --side bitgrad)")
    ap.add_argument("--phases", action="store_true", help="also time forward, backward and update apart (interleaved, --steps each)")
    a = ap.parse_args()
    peak = a.peak
    if not peak:
        out = subprocess.run([os.path.join(HERE, "..", "build", "bin", "fma_peak")], capture_output=True, text=True).stdout
        peak = max(float(line.split("GFLOPS=")[1].split("G")[0]) for line in out.splitlines() if "GFLOPS=" in line)
    thread_counts = [int(t) for t in a.threads.split(",")]
    rows = []
    if len(thread_counts) > 1 or os.environ.get("OPENBLAS_NUM_THREADS") != str(thread_counts[0]):
        for threads in thread_counts:  # a process per thread count, OpenBLAS told before it loads
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
            argv = [sys.executable, os.path.abspath(__file__), "--models", a.models, "--threads", str(threads),
                    "--rounds", str(a.rounds), "--steps", str(a.steps), "--peak", str(peak), "--side", a.side] + (["--phases"] if a.phases else [])
            r = subprocess.run(argv, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("zoo: the %d-thread run failed:\n%s" % (threads, r.stderr[-2000:]))
            for line in r.stdout.splitlines():
                if line.startswith("{"):
                    rows.append(json.loads(line))
                    print(line, flush=True)
        report(rows, peak, a.json)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            case = build(name, tmp)
            for threads in thread_counts:
                torch.set_num_threads(threads)
                bg.set_num_threads(threads)
                row = {"model": name, "how": case.how, "threads": threads, "gflop": case.flops / 1e9}
                if case.first_loss:  # torch's loss, bitgrad's, the outputs' relative difference (dropout off)
                    row["first_loss"], row["first_out_diff"] = case.first_loss[:2], case.first_loss[2]
                if case.error:
                    row["error"] = case.error
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                sides = {"torch": case.torch_step, "bitgrad": case.bitgrad_step}
                if a.side != "both":
                    sides = {a.side: sides[a.side]}
                for step in sides.values():
                    step()  # warm: the first steps allocate
                times = {side: [] for side in sides}
                for _ in range(a.rounds):  # interleaved: a slow spell of the host touches both
                    for side, step in sides.items():
                        times[side].append(time_steps(step, a.steps))
                bound = case.flops / (peak * 1e9 * threads)
                row["fma_bound_ms"] = 1e3 * bound
                for side, ts in times.items():
                    med = statistics.median(ts)
                    row.update({side + "_ms": 1e3 * med, "spread_" + side: [1e3 * min(ts), 1e3 * max(ts)], side + "_x_bound": med / bound})
                if len(times) == 2:
                    row["ratio"] = row["bitgrad_ms"] / row["torch_ms"]
                if a.phases:  # forward, backward, update: medians of --steps steps, the sides interleaved
                    parts = {side: [] for side in sides}
                    for _ in range(a.steps):
                        for side in parts:
                            parts[side].append(case.phases(side))
                    for side, ts in parts.items():
                        row[side + "_phases_ms"] = [1e3 * statistics.median(t[k] for t in ts) for k in range(3)]
                rows.append(row)
                print(json.dumps(row), flush=True)
    return 0


def report(rows, peak, json_path):
    rows = sorted(rows, key=lambda r: (r["model"], r["threads"]))
    print("\nFMA peak %.1f GFLOP/s per core" % peak)
    print("\n| model | how | threads | torch ms | bitgrad ms | bitgrad ÷ torch | FMA-bound ms | torch × bound | bitgrad × bound |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print("| %s | %s | %d | | | not imported: %s | | | |" % (r["model"], r["how"], r["threads"], r["error"]))
        else:
            f = lambda k, fmt: fmt % r[k] if k in r else ""
            print("| %s | %s | %d | %s | %s | %s | %.2f | %s | %s |" % (
                r["model"], r["how"], r["threads"], f("torch_ms", "%.1f"), f("bitgrad_ms", "%.1f"), f("ratio", "**%.2f**"),
                r["fma_bound_ms"], f("torch_x_bound", "%.1f"), f("bitgrad_x_bound", "%.1f")))
    phased = [r for r in rows if "torch_phases_ms" in r or "bitgrad_phases_ms" in r]
    if phased:
        print("\n| model | threads | torch forward / backward / update ms | bitgrad forward / backward / update ms |")
        print("|---|---:|---|---|")
        for r in phased:
            print("| %s | %d | %s | %s |" % (r["model"], r["threads"], " / ".join("%.1f" % v for v in r.get("torch_phases_ms", [])),
                                         " / ".join("%.1f" % v for v in r.get("bitgrad_phases_ms", []))))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"peak_gflops": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
