"""A parameter used twice in one forward keeps the contract (numerics.md §10, "Uses"; T5, T6):
a module called twice, an LM head tied to its embedding the way PyTorch ties it
(`head.weight = tok.weight`) and one embedding shared by two inputs give the whole batch's
gradient bits under bitgrad.accumulate (1, 2, 4 micro-batches), Accumulator, DataParallel on 1
and 2 ranks, 1 and 2 threads and a resumed run; a use that is not one sum over the samples is
reported, never passed as the whole batch; the tie trains like torch's and its state_dict goes to
torch and back."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import bitgrad as bg
from bitgrad import distributed as dist
from bitgrad import nn

import parity_bounds as pb
import shared_models as sm

NAMES = sorted(sm.MODELS)
MPIRUN = os.environ.get("BITGRAD_MPIRUN") or shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(not (MPIRUN and dist.have_mpi()), reason="no mpirun, or bitgrad built without MPI")


def grads(model):
    return [bg.fingerprint(p.grad) for p in model.parameters()]


def whole(model, x, y):
    model.zero_grad()
    loss = bg.cross_entropy(model(x), y)  # the mean over the batch, one forward and backward
    loss.backward()
    return loss.item(), grads(model)


def pieces(x, y, k):
    n = x.shape[0] // k
    return [(x[i * n:(i + 1) * n], y[i * n:(i + 1) * n]) for i in range(k)]


@pytest.mark.parametrize("name", NAMES)
def test_every_loop_gives_the_whole_batchs_bits(name):
    model = sm.make(name)
    x, y = sm.batch(name)
    want_loss, want = whole(model, x, y)
    for k in (1, 2, 4):
        for threads in (1, 2):
            bg.set_num_threads(threads)
            model.zero_grad()
            loss = bg.accumulate(model, pieces(x, y, k), sm.xent_sum(model), strict=True)
            assert (loss.item(), grads(model)) == (want_loss, want), (name, k, threads)
    bg.set_num_threads(2)
    model.zero_grad()
    acc = bg.Accumulator(model, 128)
    for xb, yb in pieces(x, y, 2):
        acc.backward(bg.cross_entropy(model(xb), yb, reduction="sum"), xb.shape[0])
    assert acc.finish().item() == want_loss and acc.whole_batch and grads(model) == want
    model.zero_grad()
    dp = dist.DataParallel(model, 128, accumulate=2)
    assert dp.step((x, y), sm.xent_sum(model)).item() == want_loss
    assert dp.whole_batch and dp.sample_mismatch == "" and grads(model) == want


@pytest.mark.parametrize("name", NAMES)
def test_a_resumed_run_is_the_straight_run(name, tmp_path):
    def run(model, opt, steps):
        for s in steps:
            opt.zero_grad()
            bg.accumulate(model, pieces(*sm.batch(name, seed=20 + s), 2), sm.xent_sum(model), strict=True)
            opt.step()
    model = sm.make(name)
    opt = bg.optim.Adam(model, lr=0.01)
    run(model, opt, range(4))
    straight = bg.fingerprint(model)
    model = sm.make(name)
    opt = bg.optim.Adam(model, lr=0.01)
    run(model, opt, range(2))
    bg.io.save_safetensors(str(tmp_path / "model.safetensors"), model.state_dict())
    state = opt.state_dict()
    steps = state.pop("steps")
    with pytest.raises(TypeError, match="the value of 'steps' is a int, not a bitgrad.Tensor"):
        bg.io.save_safetensors(str(tmp_path / "opt.safetensors"), dict(state, steps=steps))
    bg.io.save_safetensors(str(tmp_path / "opt.safetensors"), state, {"steps": str(steps)})
    model = sm.make(name, seed=99)  # other initial weights: the load must bring them all
    opt = bg.optim.Adam(model, lr=0.01)
    model.load_state_dict(bg.io.load_safetensors(str(tmp_path / "model.safetensors"))[0])
    tensors, meta = bg.io.load_safetensors(str(tmp_path / "opt.safetensors"))
    opt.load_state_dict(dict(tensors, steps=int(meta["steps"])))
    run(model, opt, range(2, 4))
    assert bg.fingerprint(model) == straight


def test_a_use_that_is_not_one_sum_over_the_samples_is_reported():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(sm.V, sm.D)
            self.w = nn.Parameter(bg.tensor(np.full((5, sm.D), 0.5, np.float32)))

        def forward(self, x):
            return bg.sum(bg.linear(self.tok(x), self.w * 0.3), 1)  # the scaling acts on each micro-batch's sum

    bg.manual_seed(0)
    model = Scaled()
    x, _ = sm.batch("tied_head")
    y = bg.tensor(np.arange(128, dtype=np.int64) % 5)
    acc = bg.Accumulator(model, 128)
    for xb, yb in pieces(x, y, 2):
        acc.backward(bg.cross_entropy(model(xb), yb, reduction="sum"), xb.shape[0])
    acc.finish()
    assert acc.whole_batch is False
    model.zero_grad()
    with pytest.raises(bg.InputError, match=r"parameter 'w' \[5, 8\] received a gradient from 'mul'"):
        bg.accumulate(model, pieces(x, y, 2), lambda a, b, r: bg.cross_entropy(model(a), b, reduction="sum"), strict=True)
    model.zero_grad()
    dp = dist.DataParallel(model, 128, accumulate=2)
    dp.step((x, y), lambda a, b, r: bg.cross_entropy(model(a), b, reduction="sum"))
    assert dp.whole_batch is False and "received a gradient from 'mul'" in dp.sample_mismatch


def test_pytorchs_sharing_lists_each_tensor_once():
    model = sm.make("tied_head")
    assert [n for n, _ in model.named_parameters()] == ["tok.weight", "fc.weight", "fc.bias"]
    assert list(model.state_dict()) == ["tok.weight", "fc.weight", "fc.bias", "head.weight"]  # torch keeps both keys
    assert bg.fingerprint(model.head.weight) == bg.fingerprint(model.tok.weight)
    twice = sm.make("shared_module")
    twice.fc2 = twice.fc  # a submodule reachable under two names
    assert [n for n, _ in twice.named_parameters()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert [n for n, _ in twice.named_modules()] == ["", "fc", "out"]
    assert "fc2.weight" in twice.state_dict()
    bg.optim.SGD(twice.parameters(), lr=0.1)  # one tensor listed twice would be refused
    with pytest.raises(bg.InputError, match=r"'weight' is f32 \[11, 8\]; the tensor assigned to it is f32 \[8, 8\]"):
        model.head.weight = model.fc.weight
    with pytest.raises(bg.InputError, match="leaf tensor that requires grad"):
        model.head.weight = model.tok.weight * 2


@needs_mpi
@pytest.mark.parametrize("name", ["tied_head", "shared_embedding"])
def test_two_ranks_give_the_fingerprint_of_one(name):
    script = os.path.join(os.path.dirname(__file__), "shared_models.py")
    env = dict(os.environ, BITGRAD_DIST_TIMEOUT="60")
    outs = []
    for P in (1, 2):
        r = subprocess.run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", str(P), sys.executable, script, name],
                           capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        outs.append([line for line in r.stdout.splitlines() if line.startswith(("fingerprint", "whole_batch"))])
    assert outs[0] == outs[1] and "whole_batch True" in outs[0], outs


torch = pytest.importorskip("torch")


def test_a_tied_head_trains_like_torchs_and_its_state_goes_to_torch_and_back():
    """20 SGD steps of the tied model in bitgrad, in torch float32 and in torch float64 (the
    reference), from the same weights on the same batches: bitgrad's loss stays within
    max(floor, K_TORCH * torch's error) of the reference (parity_bounds.py), the floor Higham &
    Mary's bound for every rounding of the run."""
    steps, lr = 20, 0.5
    model = sm.make("tied_head")

    class TorchTied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(sm.V, sm.D)
            self.fc = torch.nn.Linear(sm.D, sm.D)
            self.head = torch.nn.Linear(sm.D, sm.V, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, x):
            return self.head(torch.tanh(self.fc(self.tok(x)))).sum(1)

    t = TorchTied()
    # bitgrad's state into torch: both tied keys, as torch's own state_dict has them
    t.load_state_dict({k: torch.from_numpy(np.array(v.detach())) for k, v in model.state_dict().items()}, strict=True)
    assert t.head.weight is t.tok.weight
    r = TorchTied().double()
    r.load_state_dict({k: v.double() for k, v in t.state_dict().items()})
    opts = [bg.optim.SGD(model, lr=lr), torch.optim.SGD(t.parameters(), lr=lr), torch.optim.SGD(r.parameters(), lr=lr)]
    losses = np.zeros((steps, 3))
    for s in range(steps):
        x, y = sm.batch("tied_head", seed=40 + s)
        opts[0].zero_grad()
        loss = bg.cross_entropy(model(x), y)
        loss.backward()
        opts[0].step()
        losses[s, 0] = loss.item()
        tx, ty = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y))
        for j, (m, o) in enumerate([(t, opts[1]), (r, opts[2])], 1):
            o.zero_grad()
            tl = torch.nn.functional.cross_entropy(m(tx), ty)
            tl.backward()
            o.step()
            losses[s, j] = tl.item()
    assert losses[-5:, 0].mean() < losses[:5, 0].mean(), "the tied model did not learn"
    err = np.abs(losses[:, :2] - losses[:, 2:]) / np.abs(losses[:, 2:])
    # every rounding of the run: per step, each sample's forward and backward through the
    # embedding, fc (D terms), the head (D terms, twice: lookup and head) and the softmax (V terms)
    per_step = 128 * sm.T * (4 * sm.D + 2 * sm.V + 16) + 3 * sm.V * sm.D
    floor = pb.gamma_prob(steps * per_step, pb.U32)
    pb.check_vs_reference("per-step loss / reference loss", err[:, 0], err[:, 1], np.zeros(steps), floor)
    # torch's trained state back into bitgrad: both keys again, one tensor
    back = sm.make("tied_head", seed=7)
    back.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    assert bg.fingerprint(back.head.weight) == bg.fingerprint(back.tok.weight)
    np.testing.assert_array_equal(np.array(back.tok.weight.detach()), t.tok.weight.detach().numpy())


@pytest.mark.parametrize("transposed", [False, True])
def test_a_plain_product_with_a_parameter_is_proven(transposed):
    # x @ w (and x @ w.T): w's gradient is the product over the samples, moved exactly by the
    # transpose; strict accumulation accepts it and gives the whole batch's bits
    class Product(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(bg.randn(*((8, 16) if transposed else (16, 8))) * 0.3)
            self.out = nn.Linear(8, 4)

        def forward(self, x):
            return self.out(bg.tanh(x @ (self.w.T if transposed else self.w)))

    r = np.random.RandomState(0)
    x, y = bg.tensor(r.randn(128, 16).astype(np.float32)), bg.tensor(r.randint(0, 4, 128).astype(np.int64))
    bg.manual_seed(0)
    m = Product()
    want = whole(m, x, y)
    for k in (2, 4):
        m.zero_grad()
        loss = bg.accumulate(m, pieces(x, y, k), lambda a, b, row: bg.cross_entropy(m(a), b, reduction="sum"), strict=True)
        assert (loss.item(), grads(m)) == want, k
