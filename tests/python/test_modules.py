"""Modules written in Python (subclasses of bitgrad.nn.Module): registration by
assignment in order, state_dict with PyTorch's keys, train()/eval() reaching dropout and batch
norm inside, the containers, and the rest of bitgrad taking them as any module (optimizers,
checkpoint, mixed precision, fingerprints, safetensors, the step trace and diff)."""
import gc
import json
import os
import subprocess

import numpy as np
import pytest

import bitgrad as bg
from bitgrad import nn


class MLP(nn.Module):
    def __init__(self, d_in=6, d_hidden=8, d_out=3, p=0.5):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(d_hidden, d_out)
        self.scale = nn.Parameter(bg.ones(d_out))
        self.register_buffer("calls", bg.zeros(1))

    def forward(self, x):
        return self.fc2(self.drop(bg.relu(self.fc1(x)))) * self.scale


def make(seed=1):
    bg.manual_seed(seed)
    return MLP()


def test_registration_order_and_names():
    m = make()
    # PyTorch's order: a module's own parameters (and buffers) before its children's
    assert [n for n, _ in m.named_parameters()] == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["calls"]
    assert list(m.state_dict()) == ["scale", "calls", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_children()] == ["fc1", "drop", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "drop", "fc2"]
    assert m.modules()[0] is m and m.children()[0] is m.fc1
    assert len(m.parameters()) == 5 and len(m.buffers()) == 1
    assert isinstance(m, nn.Module) and isinstance(m.fc1, nn.Module) and isinstance(m.scale, nn.Parameter)
    assert "(fc1): Linear(6, 8)" in repr(m)


def test_reassignment_keeps_place_and_plain_attributes_are_not_registered():
    m = make()
    m.fc1 = nn.Linear(6, 8, seed=3)                       # replaced in place: the order stays
    assert [n for n, _ in m.named_parameters()][1:3] == ["fc1.weight", "fc1.bias"]
    m.note = bg.ones(2)                                    # a plain tensor: an attribute only
    m.computed = bg.ones(2, requires_grad=True) * 2        # not a leaf: not a parameter
    assert "note" not in m.state_dict() and "computed" not in m.state_dict()
    del m.scale
    assert "scale" not in m.state_dict()
    with pytest.raises(TypeError, match="cannot assign a int as child module 'fc2'"):
        m.fc2 = 3


def test_missing_super_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(TypeError, match="super\\(\\).__init__\\(\\)"):
        Bad()


def test_register_api_and_persistent_buffers():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_parameter("w", nn.Parameter(bg.ones(2)))
            self.register_buffer("mask", bg.ones(2), persistent=False)
            self.register_buffer("stat", bg.zeros(2))
            self.add_module("lin", nn.Linear(2, 2))

        def forward(self, x):
            return self.lin(x * self.w * self.mask)

    m = M()
    assert list(m.state_dict()) == ["w", "stat", "lin.weight", "lin.bias"]
    assert [n for n, _ in m.named_buffers()] == ["mask", "stat"]
    with pytest.raises(TypeError, match="register_buffer: Linear is a C\\+\\+ layer"):
        nn.Linear(2, 2).register_buffer("x", bg.ones(1))
    with pytest.raises(TypeError, match="must be a leaf tensor"):
        m.register_parameter("v", 3)


def test_state_dict_keys_are_pytorchs():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(4)
            self.bn = nn.BatchNorm1d(4)
            self.gn = nn.GroupNorm(2, 4)

        def forward(self, x):
            return self.gn(self.bn(self.ln(x)))

    keys = list(Net().state_dict())
    assert keys == ["ln.weight", "ln.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                    "gn.weight", "gn.bias"]
    import torch

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(4)
            self.bn = torch.nn.BatchNorm1d(4)
            self.gn = torch.nn.GroupNorm(2, 4)

    assert keys == list(TNet().state_dict())


def test_load_state_dict_strict_and_not():
    a, b = make(1), make(2)
    assert bg.fingerprint(a) != bg.fingerprint(b)
    r = b.load_state_dict(a.state_dict())
    assert bg.fingerprint(a) == bg.fingerprint(b) and r.missing_keys == [] and r.unexpected_keys == []
    sd = dict(a.state_dict())
    del sd["scale"]
    sd["extra"] = bg.ones(1)
    with pytest.raises(bg.InputError, match="missing 'scale', unexpected 'extra'"):
        b.load_state_dict(sd)
    r = b.load_state_dict(sd, strict=False)
    assert r.missing_keys == ["scale"] and r.unexpected_keys == ["extra"]


def test_train_eval_reach_cpp_children_and_dropout_draws():
    m = make()
    x = bg.ones(4, 6)
    assert m.training and m.drop.training and m.fc1.training
    m.eval()
    assert not m.training and not m.drop.training
    y1, y2 = m(x), m(x)
    assert bg.fingerprint(y1) == bg.fingerprint(y2)                 # evaluation: no dropout
    m.train()
    z1, z2 = m(x), m(x)
    assert bg.fingerprint(z1) != bg.fingerprint(z1 * 0 + y1)         # training: dropped
    assert bg.fingerprint(z1) != bg.fingerprint(z2)                 # a new automatic step each call
    # the same program gives the same draws
    m2 = make()
    assert bg.fingerprint(m2(x)) == bg.fingerprint(z1) and bg.fingerprint(m2(x)) == bg.fingerprint(z2)


def test_explicit_step_context():
    m = make()
    x = bg.ones(4, 6)
    with nn.context(step=5):
        a = m(x)
    with nn.context(step=5):
        b = m(x)
    with nn.context(step=6):
        c = m(x)
    assert bg.fingerprint(a) == bg.fingerprint(b) != bg.fingerprint(c)
    # the context reaches the C++ Dropout as nn.Context would
    d = m.drop(bg.ones(4, 8), nn.Context(training=True, seed=1, step=5))
    with nn.context(seed=1, step=5):
        e = m.drop(bg.ones(4, 8))
    assert bg.fingerprint(d) == bg.fingerprint(e)


def test_batchnorm_inside_python_module_follows_train_eval():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, seed=1)
            self.bn = nn.BatchNorm2d(2)

        def forward(self, x):
            return self.bn(self.conv(x))

    net = Net()
    x = bg.randn(4, 1, 5, 5, seed=3)
    net(x)
    assert int(net.bn.num_batches_tracked.item()) == 1      # training: the running statistics move
    net.eval()
    net(x)
    assert int(net.bn.num_batches_tracked.item()) == 1


def test_a_child_of_a_sequential_keeps_its_own_mode():
    # PyTorch: each module's own .training decides, not its container's
    seq = nn.Sequential(nn.Linear(6, 8, seed=1), nn.Dropout(0.5), nn.Linear(8, 3, seed=2), nn.BatchNorm1d(3))
    x = bg.randn(16, 6, seed=4)
    seq[1].eval()                                                   # dropout off, the rest still trains
    seq[3].eval()
    assert seq.training and not seq[1].training and not seq[3].training
    y = seq[2](seq[0](x))                                           # no mask drawn
    assert bg.fingerprint(seq(x)) == bg.fingerprint(seq[3](y))      # batch norm by its running statistics
    seq[3].train()
    before = int(seq[3].num_batches_tracked.item())
    seq(x)
    assert int(seq[3].num_batches_tracked.item()) == before + 1     # a training child still updates
    # a child training inside a container in evaluation: PyTorch would train it alone; refused
    seq.eval()
    seq[1].train()
    with pytest.raises(bg.Error, match="training mode inside a container in evaluation mode"):
        seq(x)


def test_containers_mix_python_and_cpp():
    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.lin = nn.Linear(d, d)

        def forward(self, x):
            return bg.relu(self.lin(x)) + x

    bg.manual_seed(3)
    seq = nn.Sequential(Block(4), nn.Linear(4, 4), Block(4))
    gc.collect()  # the Python blocks live as long as the C++ Sequential holds them
    assert [n for n, _ in seq.named_parameters()] == ["0.lin.weight", "0.lin.bias", "1.weight", "1.bias", "2.lin.weight", "2.lin.bias"]
    y = seq(bg.ones(2, 4))
    assert y.shape == (2, 4)
    ml = nn.ModuleList([Block(4), nn.Linear(4, 4)])
    ml.append(Block(4))
    assert len(ml) == 3 and isinstance(ml[1], nn.Linear) and [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    md = nn.ModuleDict({"a": Block(4), "b": nn.Linear(4, 2)})
    assert list(md) == ["a", "b"] and "a" in md and md["b"].out_features == 2
    assert [n for n, _ in md.named_parameters()] == ["a.lin.weight", "a.lin.bias", "b.weight", "b.bias"]

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(4) for _ in range(2)])
            self.head = nn.Sequential(nn.Linear(4, 2))

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    h = Holder()
    assert list(h.state_dict())[:2] == ["blocks.0.lin.weight", "blocks.0.lin.bias"]
    assert h(bg.ones(3, 4)).shape == (3, 2)


def test_requires_grad_zero_grad_apply_to():
    m = make()
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_(True)
    m(bg.ones(2, 6)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(float(np.abs(p.grad.numpy()).sum()) == 0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "Dropout", "Linear", "MLP"]
    m.to(bg.float64)
    assert all(p.dtype == bg.float64 for p in m.parameters()) and m.fc1.weight.dtype == bg.float64
    assert m(bg.ones(2, 6, dtype=bg.float64)).dtype == bg.float64


def test_optimizer_and_fingerprint_reproducible():
    def run():
        m = make(7)
        opt = bg.optim.AdamW(m, lr=0.01, weight_decay=0.01)
        x, y = bg.randn(8, 6, seed=1), bg.randn(8, 3, seed=2)
        for _ in range(5):
            opt.zero_grad()
            bg.mse_loss(m(x), y).backward()
            opt.step()
        return bg.fingerprint(m), sorted(opt.state_dict())[:2]

    a, b = run(), run()
    assert a == b and a[1] == ["exp_avg.fc1.bias", "exp_avg.fc1.weight"]


def test_checkpoint_recomputes_the_same_bits():
    class Net(nn.Module):
        def __init__(self, recompute):
            super().__init__()
            self.recompute = recompute
            self.body = MLP(6, 8, 6)
            self.head = nn.Linear(6, 2)

        def forward(self, x):
            h = bg.checkpoint(self.body, x, self.body) if self.recompute else self.body(x)
            return self.head(bg.dropout(h, 0.3))     # functional dropout draws after the checkpoint

    grads = []
    for recompute in (False, True):
        bg.manual_seed(4)
        net = Net(recompute)
        bg.mse_loss(net(bg.ones(3, 6)), bg.zeros(3, 2)).backward()
        grads.append(bg.fingerprint([p.grad for p in net.parameters()]))
    assert grads[0] == grads[1]


def test_mixed_precision_reaches_cpp_children():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3, seed=1)

        def forward(self, x):
            return self.lin(x)

    net = Net()
    x = bg.randn(2, 4, seed=5)
    with nn.context(step=0, precision="bf16"):
        a = net(x)
    b = net.lin(x, nn.Context(precision="bf16"))
    c = net(x)
    assert bg.fingerprint(a) == bg.fingerprint(b) != bg.fingerprint(c)


def test_safetensors_round_trip(tmp_path):
    a, b = make(1), make(2)
    path = str(tmp_path / "m.safetensors")
    bg.io.save_safetensors(path, a.state_dict(), {})
    loaded = bg.io.load_safetensors(path)
    tensors = loaded[0] if isinstance(loaded, tuple) else loaded
    b.load_state_dict(dict(tensors))
    assert bg.fingerprint(a.state_dict()) == bg.fingerprint(b.state_dict())


def _python_run(out, threads, perturb=False):
    bg.set_num_threads(threads)
    m = make(11)
    opt = bg.optim.SGD(m, lr=0.1, momentum=0.9)
    with bg.instruments.StepTrace(out, m) as trace:
        for step in range(4):
            x = bg.randn(8, 6, seed=100, stream=step)
            y = bg.randn(8, 3, seed=200, stream=step)
            if perturb and step == 2:
                x = x * 1.0001
            opt.zero_grad()
            loss = bg.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            trace.step(step + 1, loss, input=x)


def test_step_trace_and_diff_of_two_python_runs(tmp_path, cli):
    _python_run(str(tmp_path / "a"), 1)
    _python_run(str(tmp_path / "b"), 2)
    _python_run(str(tmp_path / "c"), 1, perturb=True)
    r = bg.instruments.diff(str(tmp_path / "a"), str(tmp_path / "b"), replay=False, quiet=True)
    assert r["identical"], r["text"]
    assert "run.threads: 1 | 2" in r["text"]
    r = bg.instruments.diff(str(tmp_path / "a"), str(tmp_path / "c"), replay=False, quiet=True)
    assert not r["identical"] and "first difference: step 3, the input batch" in r["text"], r["text"]
    out = subprocess.run([cli, "diff", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True, text=True)
    assert out.returncode == 0 and "identical: 4 steps" in out.stdout, out.stdout + out.stderr
    first = json.loads(open(os.path.join(str(tmp_path / "a"), "trace.jsonl")).readline())
    assert [n for n, _ in first["grad"]] == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_output_shape_of_python_module():
    m = make()
    with pytest.raises(bg.InputError, match="MLP.output_shape: not defined"):
        nn.Sequential(m).output_shape([2, 6])

    class Sized(MLP):
        def output_shape(self, s):
            return (s[0], 3)

    assert nn.Sequential(Sized(), nn.Linear(3, 2)).output_shape([5, 6]) == (5, 2)


def test_a_cpp_callers_context_reaches_the_modules_inside_a_python_forward():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x)

    bg.manual_seed(6)
    block = Block()
    seq = nn.Sequential(block)
    x = bg.ones(3, 8)
    by_cpp = seq(x, nn.Context(training=True, seed=1, step=2))       # a C++ Sequential runs the Python block
    with nn.context(seed=1, step=2):
        by_python = block(x)                                          # the block in its own (training) mode
    assert fp(by_cpp) == fp(by_python) != fp(x)
    assert fp(seq(x, nn.Context(training=False))) == fp(x)           # the caller's evaluation wins
    block.eval()
    assert fp(seq(x, nn.Context(training=True, seed=1, step=2))) == fp(by_cpp)


def fp(x):
    return bg.fingerprint(x)
