"""The zoo benchmark (make bench-zoo; docs/benchmarks.md): one training step (forward, backward,
optimizer) of models users bring, bitgrad against PyTorch 1.13 eager on the same weights and
batches, at 1 and 2 threads. Rounds interleave the two sides; each figure is the median of the
rounds' median step times. Each row also gives the step's FMA-bound limit: its multiply-adds
(the products of the GEMMs and convolutions, forward and both gradients, counted by hooks on the
torch model) over the FMA peak of the threads, and both sides' time as a multiple of it.

  python3 bench/zoo.py [--models a,b] [--threads 1,2] [--rounds 3] [--steps 10] [--peak GFLOPS]
  models: lstm_seq, lstm_classifier, gru_classifier, resnet18, mobilenet_v2, shufflenet_v2, efficientnet_b0 (the CNNs
  through ONNX), transformer_lm (torch's TransformerEncoder through ONNX; its FMA bound counts the Linear modules
  only, not the attention's in-projection and products)

A model that bitgrad cannot take (an ONNX op it does not import) is a row with the reason.
Each thread count runs in a process of its own with OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set
(Debian's torch computes its GEMMs in OpenBLAS, which reads its thread count when loaded and
ignores torch.set_num_threads).
"""
import argparse
import json
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


def copy_weights(torch_model, bg_model):
    state = {k: bg.tensor(v.detach().numpy().copy()) for k, v in torch_model.state_dict().items()}
    bg_model.load_state_dict(state)


class Case:
    """A model on both sides: torch_step() and bitgrad_step() each run one training step."""

    def __init__(self, name, how, torch_model, batch, make_bg, torch_loss, bg_loss, lr=0.01):
        self.name, self.how, self.error = name, how, None
        self.t_model, self.batch = torch_model, batch
        self.t_opt = torch.optim.Adam(torch_model.parameters(), lr=lr)
        self.t_loss, self.b_loss = torch_loss, bg_loss
        self.flops = count_flops(torch_model, batch[0])
        try:
            self.b_model = make_bg(torch_model)
            self.b_opt = bg.optim.Adam(self.b_model.parameters(), lr=lr)
            self.b_batch = tuple(bg.tensor(t.numpy()) for t in batch)
        except Exception as e:  # the row says why
            self.error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])

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


def onnx_case(name, builder, batch_size, tmp):
    torch.manual_seed(0)
    model = builder()
    x = torch.randn(batch_size, 3, 32, 32)
    y = torch.randint(0, 10, (batch_size,))
    path = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=17)
    step = [0]

    def bg_loss(out, target):
        return bg.cross_entropy(out, target)

    class Graph:  # the graph module called as the others: ctx in training mode, the step counted
        def __init__(self, g):
            self.g = g

        def __call__(self, xb):
            step[0] += 1
            return self.g(xb, bg.nn.Context(training=True, step=step[0]))

        def parameters(self):
            return self.g.parameters()

    def make_bg(_):
        return Graph(bg.onnx.load(path))

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
        step = [0]

        class Graph:
            def __init__(self, g):
                self.g = g

            def __call__(self, xb):
                step[0] += 1
                return self.g(xb, bg.nn.Context(training=True, step=step[0]))

            def parameters(self):
                return self.g.parameters()

        return Case(name, "TransformerEncoder char LM (dim 128, 2 layers, b64 T32) through ONNX", model, (x, y),
                    lambda _: Graph(bg.onnx.load(path)), F.cross_entropy, bg.cross_entropy)
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
    ap.add_argument("--models", default="lstm_seq,lstm_classifier,gru_classifier,resnet18,mobilenet_v2,shufflenet_v2,efficientnet_b0,transformer_lm")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--peak", type=float, default=0.0, help="FMA peak per core, GFLOP/s (default: build/bin/fma_peak)")
    ap.add_argument("--json", default="")
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
                    "--rounds", str(a.rounds), "--steps", str(a.steps), "--peak", str(peak)]
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
                if case.error:
                    row["error"] = case.error
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                case.torch_step()
                case.bitgrad_step()  # warm: the first steps allocate
                t_s, b_s = [], []
                for _ in range(a.rounds):  # interleaved: a slow spell of the host touches both
                    t_s.append(time_steps(case.torch_step, a.steps))
                    b_s.append(time_steps(case.bitgrad_step, a.steps))
                tt, bt = statistics.median(t_s), statistics.median(b_s)
                bound = case.flops / (peak * 1e9 * threads)
                row.update({"torch_ms": 1e3 * tt, "bitgrad_ms": 1e3 * bt, "ratio": bt / tt,
                            "spread_torch": [1e3 * min(t_s), 1e3 * max(t_s)], "spread_bitgrad": [1e3 * min(b_s), 1e3 * max(b_s)],
                            "fma_bound_ms": 1e3 * bound, "torch_x_bound": tt / bound, "bitgrad_x_bound": bt / bound})
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
            print("| %s | %s | %d | %.1f | %.1f | **%.2f** | %.2f | %.1f | %.1f |" % (
                r["model"], r["how"], r["threads"], r["torch_ms"], r["bitgrad_ms"], r["ratio"], r["fma_bound_ms"],
                r["torch_x_bound"], r["bitgrad_x_bound"]))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"peak_gflops": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
