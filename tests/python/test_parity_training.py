"""Training parity with PyTorch on real Fashion-MNIST (Debian's dataset-fashion-mnist): the same
models trained for 100 steps in bitgrad and in torch 1.13, float32, from identical initial
weights and on identical batches.

* The initial weights are bitgrad's (Sequential(..., seed=s)), written with
  bitgrad.io.save_safetensors and read back for torch by the small reader below (8-byte
  little-endian header length, JSON header {name: {dtype, shape, data_offsets}}, raw data), so
  the handover really goes through the file; the test checks torch then holds the same bits.
* The batches are bitgrad's loader's (DataLoader(train, 64, seed=..., shuffle=True)), each
  batch's x and y handed to both libraries.
* The optimizer is SGD with momentum. bitgrad's update (docs/numerics.md §17, src/optim,
  kernels' sgd_update) is v = m*v + g (v from +0), p = p - lr*v; torch.optim.SGD (dampening 0,
  no Nesterov, no weight decay) is buf = g at its first step, then buf = m*buf + g, and
  p = p - lr*buf: the same update (m*0 + g = g exactly).

Bounds (derived, not fitted; parity_bounds.py). torch also trains a float64 copy of the model from
the same initial weights on the same batches: the reference trajectory (its rounding errors are
2^-29 times float32's). bitgrad's trajectory is the same on every CPU (T8), torch's float32 one is
not, so both are measured against the reference and bitgrad's error may reach
max(floor, K_TORCH * torch's error). The floor is Higham & Mary's probabilistic bound
gamma_prob(n) for n = every rounding of the run (STEPS * step_terms: one step's forward, backward
and update) acting on values no larger than the result: that assumes the trajectory does not
amplify a perturbation, which the nudge measurements below check (1-ulp nudges of hundreds of
weights move the losses by less than the nudges themselves).

* per-step loss, relative to the reference loss;
* test accuracy on the first 2000 test samples: a prediction can leave the reference model's only
  where the reference's top-2 logit margin is within twice the floor times the logits' scale;
  bitgrad's predictions may differ from the reference's on at most that many samples (or K_TORCH
  times as many as torch's do).

(Measured on the development machine against torch f32: MLP max loss relative difference 2.6e-6,
CNN 3.0e-7, 0 of 2000 predictions differ; these numbers are not the bounds.)

Why those CNN hyperparameters: this CNN's f32 training is chaotic at larger steps. At lr 0.05
with momentum 0.9, nudging ONE initial weight by 1 ulp moves bitgrad's own loss by up to 31%
by step 100 (init/loader seeds 7/5), and torch f32 differs from torch f64 by 6% (seeds 3/11) —
so no two f32 implementations can agree there, whatever their quality (bitgrad vs torch f32:
18%). The free-running comparison uses a trajectory that is not sensitive: lr 0.02, momentum 0.5
(with seeds 1/2, 1-ulp nudges of ~600 weights across all layers change bitgrad's losses by at most
3.7e-7), and seeds 3/4, whose float32 trajectories do not leave the float64 one. Max-pool and ReLU
make the step discontinuous where two values nearly tie, and a near-tie decided otherwise in
float32 than in float64 moves a trajectory by ~1% (seeds 1/2: both libraries' float32 runs leave
the float64 one at step ~12, identically on the development machine; 4/5: bitgrad's does, torch's
not; 5/6: the reverse): no bound holds across such a decision, and which f32 run meets one depends
on its last bits, so on the CPU for torch. Seeds 3/4 have none in bitgrad's (CPU-independent) run.
The chaotic setting is still covered step by step by
test_cnn_lockstep_chaotic_setting: before every step torch is given bitgrad's weights and
momentum buffers, so each step's loss, gradient-driven update and new momentum are compared
without the chaotic amplification (against the float64 step from the same state; floor
gamma_prob(step_terms) of one step, plus for the update the rounding of p - lr*v to float32, half
an ulp of |p|). The 784-512-512-10 MLP of
examples/fashion_mlp.toml is chaotic at lr 0.05 / momentum 0.9 too (1-ulp nudges: up to 12%
by step 100), so it is left out of the free-running comparison.
"""
import copy
import json
import struct
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bitgrad as bg  # noqa: E402
import parity_bounds as pb  # noqa: E402

STEPS = 100
BATCH = 64
EVAL_SAMPLES = 2000


# ---- a safetensors reader (torch 1.13 has no safetensors package) --------------------------------

_ST_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "U8": "u1", "F16": "<f2"}


def read_safetensors(path):
    """(tensors as numpy arrays by name, in file order, metadata) of a safetensors file"""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", {})
    out = {}
    spans = []
    for name, info in header.items():
        start, end = info["data_offsets"]
        dt = np.dtype(_ST_DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        assert end - start == dt.itemsize * int(np.prod(shape, dtype=np.int64)), name
        out[name] = np.frombuffer(data[start:end], dtype=dt).reshape(shape).copy()
        spans.append((start, end))
    spans.sort()
    # the data section is the tensors back to back, nothing else
    assert spans[0][0] == 0 and spans[-1][1] == len(data) and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    return out, metadata


# ---- the models -----------------------------------------------------------------------------------

def mlp_pair(seed):
    m = bg.nn.Sequential(bg.nn.Flatten(), bg.nn.Linear(784, 128), bg.nn.ReLU(), bg.nn.Linear(128, 10), seed=seed)
    t = tnn.Sequential(tnn.Flatten(), tnn.Linear(784, 128), tnn.ReLU(), tnn.Linear(128, 10))
    return m, t


def cnn_pair(seed):
    m = bg.nn.Sequential(bg.nn.Conv2d(1, 8, 5), bg.nn.ReLU(), bg.nn.MaxPool2d(2), bg.nn.Conv2d(8, 16, 5), bg.nn.ReLU(),
                         bg.nn.MaxPool2d(2), bg.nn.Flatten(), bg.nn.Linear(256, 10), seed=seed)
    t = tnn.Sequential(tnn.Conv2d(1, 8, 5), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(8, 16, 5), tnn.ReLU(),
                       tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(256, 10))
    return m, t


@pytest.fixture(scope="module")
def fashion():
    try:
        return bg.data.fashion_mnist(train=True), bg.data.fashion_mnist(train=False)
    except bg.Error as e:  # the dataset package is a test dependency: say so rather than skip
        pytest.fail("Fashion-MNIST is not readable (Debian's dataset-fashion-mnist): %s" % e)


@pytest.fixture(autouse=True)
def _threads():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 OpenMP threads on this 2-core machine are ~25x slower (spinning)
    bg.set_num_threads(2)
    yield
    torch.set_num_threads(prev)


def hand_over(m, t, path):
    """bitgrad's initial weights into torch through a safetensors file"""
    bg.io.save_safetensors(str(path), m.state_dict())
    arrays, metadata = read_safetensors(path)
    assert list(arrays) == list(m.state_dict()), "the file holds the parameters in the module's order"
    assert metadata.get("bitgrad.checksum", "").startswith("xxh3-128:")
    t.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()}, strict=True)
    for (name, p), (tname, q) in zip(m.state_dict().items(), t.state_dict().items()):
        assert name == tname
        assert q.dtype == torch.float32 and np.array_equal(p.detach().numpy(), q.numpy()), name  # the same bits


def batch_arrays(b):
    return np.array(b.x.numpy()), np.array(b.y.numpy())


def eval_logits(m, t, r, test_ds):
    """(labels, bitgrad's, torch's and the float64 reference's logits) on the first EVAL_SAMPLES test samples"""
    loader = bg.data.DataLoader(test_ds, 1000, shuffle=False, drop_last=False)
    ys, out = [], ([], [], [])
    while sum(len(y) for y in ys) < EVAL_SAMPLES:
        b = loader.next()
        x, y = batch_arrays(b)
        ys.append(y)
        with bg.no_grad():
            out[0].append(m(b.x).numpy().astype(np.float64))
        with torch.no_grad():
            out[1].append(t(torch.from_numpy(x)).numpy().astype(np.float64))
            out[2].append(r(torch.from_numpy(x.astype(np.float64))).numpy())
    assert sum(len(y) for y in ys) == EVAL_SAMPLES
    return (np.concatenate(ys),) + tuple(np.concatenate(o) for o in out)


def step_terms(t, x):
    """the roundings on the path to one value in one SGD step of the torch model t (a Sequential) on
    the batch x: forward, each convolution / linear layer sums (inputs) * kernel terms and every
    layer adds 16 elementwise roundings; the loss adds a row of classes and the batch mean; backward
    the same sums again for the input gradients, plus the longest weight-gradient sum (batch times
    output positions); the update 4 roundings. Layers run one after another, so the counts add."""
    n, longest = 0, 0
    h = torch.from_numpy(x)
    with torch.no_grad():
        for layer in t:
            h_out = layer(h)
            if isinstance(layer, tnn.Conv2d):
                n += 2 * (layer.in_channels * int(np.prod(layer.kernel_size)) + 16)
                longest = max(longest, h_out.shape[0] * int(np.prod(h_out.shape[2:])))
            elif isinstance(layer, tnn.Linear):
                n += 2 * (layer.in_features + 16)
                longest = max(longest, h_out.shape[0])
            else:
                n += 2 * 16
            h = h_out
    return n + 2 * (h.shape[1] + 16) + h.shape[0] + longest + 4


def train_both(m, t, r, train_ds, lr, momentum, loader_seed):
    """bitgrad's m, torch's t and the float64 reference r on the same batches: (losses [STEPS, 3],
    seconds of bitgrad and of torch f32, the first batch's x)"""
    opt = bg.optim.SGD(m, lr=lr, momentum=momentum)
    topt = torch.optim.SGD(t.parameters(), lr=lr, momentum=momentum)
    ropt = torch.optim.SGD(r.parameters(), lr=lr, momentum=momentum)
    loader = bg.data.DataLoader(train_ds, BATCH, seed=loader_seed, shuffle=True)
    losses = np.zeros((STEPS, 3))
    secs = [0.0, 0.0]
    first = None
    for k in range(STEPS):
        b = loader.next()
        x, y = batch_arrays(b)
        first = x if first is None else first
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = bg.cross_entropy(m(b.x, bg.nn.Context(training=True, step=k)), b.y)
        loss.backward()
        opt.step()
        losses[k, 0] = loss.item()
        t1 = time.perf_counter()
        topt.zero_grad()
        tl = F.cross_entropy(t(torch.from_numpy(x)), torch.from_numpy(y))
        tl.backward()
        topt.step()
        losses[k, 1] = tl.item()
        secs[0] += t1 - t0
        secs[1] += time.perf_counter() - t1
        ropt.zero_grad()
        rl = F.cross_entropy(r(torch.from_numpy(x.astype(np.float64))), torch.from_numpy(y))
        rl.backward()
        ropt.step()
        losses[k, 2] = rl.item()
    return losses, secs, first


def check_run(make_pair, init_seed, loader_seed, lr, momentum, fashion, tmp_path):
    train_ds, test_ds = fashion
    m, t = make_pair(init_seed)
    hand_over(m, t, tmp_path / "init.safetensors")
    r = copy.deepcopy(t).double()
    losses, secs, x0 = train_both(m, t, r, train_ds, lr, momentum, loader_seed)
    assert np.all(np.isfinite(losses))
    err = np.abs(losses[:, :2] - losses[:, 2:]) / np.abs(losses[:, 2:])  # bitgrad's, torch's relative error per step
    floor = pb.gamma_prob(STEPS * step_terms(t, x0), pb.U32)  # module docstring
    print("loss relative error vs f64: bitgrad max %.3g (step %d), torch max %.3g; floor %.3g; last loss %.6f / %.6f / %.6f; "
          "seconds bitgrad %.2f torch %.2f" % (err[:, 0].max(), int(np.argmax(err[:, 0])), err[:, 1].max(), floor,
                                               *losses[-1], *secs))
    pb.check_vs_reference("per-step loss / reference loss", err[:, 0], err[:, 1], np.zeros(STEPS), floor)
    assert losses[-10:, 0].mean() < 0.75 * losses[:10, 0].mean(), "the model did not learn"  # the comparison means something
    y, l_bg, l_th, l_ref = eval_logits(m, t, r, test_ds)
    p_bg, p_th, p_ref = l_bg.argmax(1), l_th.argmax(1), l_ref.argmax(1)
    top2 = np.sort(l_ref, axis=1)[:, -2:]
    near_ties = int(np.sum(top2[:, 1] - top2[:, 0] <= 2 * floor * pb.scale(l_ref)))
    off_bg, off_th = int(np.sum(p_bg != p_ref)), int(np.sum(p_th != p_ref))
    acc_bg, acc_th = float(np.mean(p_bg == y)), float(np.mean(p_th == y))
    print("test accuracy on %d samples: bitgrad %.4f torch %.4f (predictions off the f64 model's: bitgrad %d, torch %d; "
          "%d near-ties allowed; %d differ between the two)" % (EVAL_SAMPLES, acc_bg, acc_th, off_bg, off_th, near_ties,
                                                               int(np.sum(p_bg != p_th))))
    assert off_bg <= max(near_ties, pb.K_TORCH * off_th), (off_bg, near_ties, off_th)
    assert acc_bg > 0.5


def test_mlp_training_matches_torch(fashion, tmp_path):
    check_run(mlp_pair, init_seed=3, loader_seed=11, lr=0.05, momentum=0.9, fashion=fashion, tmp_path=tmp_path)


def test_cnn_training_matches_torch(fashion, tmp_path):
    # see the module docstring for why lr 0.02 / momentum 0.5 and these seeds
    check_run(cnn_pair, init_seed=3, loader_seed=4, lr=0.02, momentum=0.5, fashion=fashion, tmp_path=tmp_path)


def test_cnn_lockstep_chaotic_setting(fashion, tmp_path):
    """lr 0.05, momentum 0.9, where free-running f32 trajectories separate: before each step torch
    takes bitgrad's weights and momentum buffers, then both take the step; the losses, the
    parameter updates and the new momentum buffers are compared."""
    steps, lr, momentum = 40, 0.05, 0.9
    train_ds, _ = fashion
    m, t = cnn_pair(3)
    hand_over(m, t, tmp_path / "init.safetensors")
    r = copy.deepcopy(t).double()
    opt = bg.optim.SGD(m, lr=lr, momentum=momentum)
    topt = torch.optim.SGD(t.parameters(), lr=lr, momentum=momentum)
    ropt = torch.optim.SGD(r.parameters(), lr=lr, momentum=momentum)
    loader = bg.data.DataLoader(train_ds, BATCH, seed=11, shuffle=True)
    names = list(m.state_dict())
    tparams, rparams = dict(t.named_parameters()), dict(r.named_parameters())
    worst = {"loss": 0.0, "update": 0.0, "momentum": 0.0}  # bitgrad's error / its bound (module docstring)
    floor = None
    for k in range(steps):
        b = loader.next()
        x, y = batch_arrays(b)
        floor = floor or pb.gamma_prob(step_terms(t, x), pb.U32)  # one step from a common state
        before = {n: p.detach().numpy().copy() for n, p in m.state_dict().items()}
        vel = {n: opt.state_dict()["momentum." + n].numpy().copy() for n in names} if k else None
        with torch.no_grad():
            for n in names:
                tparams[n].copy_(torch.from_numpy(before[n]))
                rparams[n].copy_(torch.from_numpy(before[n].astype(np.float64)))
                if vel is not None:
                    topt.state[tparams[n]]["momentum_buffer"].copy_(torch.from_numpy(vel[n]))
                    ropt.state[rparams[n]]["momentum_buffer"].copy_(torch.from_numpy(vel[n].astype(np.float64)))
        opt.zero_grad()
        loss = bg.cross_entropy(m(b.x, bg.nn.Context(training=True, step=k)), b.y)
        loss.backward()
        opt.step()
        losses = []
        for model, o, xx in ((t, topt, x), (r, ropt, x.astype(np.float64))):
            o.zero_grad()
            tl = F.cross_entropy(model(torch.from_numpy(xx)), torch.from_numpy(y))
            tl.backward()
            o.step()
            losses.append(tl.item())
        e_bg, e_th = (abs(v - losses[1]) / abs(losses[1]) for v in (loss.item(), losses[0]))
        worst["loss"] = max(worst["loss"], e_bg / max(floor, pb.K_TORCH * e_th))
        after = m.state_dict()
        state = opt.state_dict()
        for n in names:
            d_ref = rparams[n].detach().numpy() - before[n]
            s_d = pb.scale(d_ref)
            # the update also holds the rounding of p - lr*v to f32: half an ulp of |p| (and of |lr*v|)
            upd_floor = floor + pb.U32 * float(np.max(np.abs(before[n]) + np.abs(d_ref))) / s_d
            e_bg = pb.max_err(after[n].detach().numpy() - before[n], d_ref) / s_d
            e_th = pb.max_err(tparams[n].detach().numpy() - before[n], d_ref) / s_d
            worst["update"] = max(worst["update"], e_bg / max(upd_floor, pb.K_TORCH * e_th))
            v_ref = ropt.state[rparams[n]]["momentum_buffer"].numpy()
            s_v = pb.scale(v_ref)
            e_bg = pb.max_err(state["momentum." + n].numpy(), v_ref) / s_v
            e_th = pb.max_err(topt.state[tparams[n]]["momentum_buffer"].numpy(), v_ref) / s_v
            worst["momentum"] = max(worst["momentum"], e_bg / max(floor, pb.K_TORCH * e_th))
    print("lockstep worst error / bound: %s (floor %.3g)" % ({k: "%.3g" % v for k, v in worst.items()}, floor))
    assert max(worst.values()) <= 1, worst
