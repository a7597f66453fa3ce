"""bitgrad.torch: an unmodified PyTorch script recorded into a run directory that `bitgrad diff`
compares (docs/torch.md). Every recording runs in a subprocess, as users run it, so that this
process never imports bitgrad.torch (its hooks, and `bitgrad.torch` as an attribute of the
package, stay out of the other tests)."""
import ctypes
import ctypes.util
import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bitgrad

from conftest import BITGRAD_BIN, SOURCE_DIR

torch = pytest.importorskip("torch")

# An MLP with dropout on random data, a seeded shuffling DataLoader, Adam and a step-LR schedule
# made before any recording starts. Environment switches: PERTURB_STEP adds 1e-7 to one weight
# before that step's update; RESEED_STEP reseeds torch (another dropout mask) before that step's
# forward; WORKERS sets the loader's workers; SAVE_TO saves the last step's batch, loss,
# gradients and updated parameters; RECORD_INSIDE records with `with bitgrad.torch.record(...)`.
MLP = """
import contextlib, os, random
import numpy as np
import torch
import torch.nn.functional as F

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
X = torch.randn(192, 12)
Y = torch.randint(0, 3, (192,))
g = torch.Generator()
g.manual_seed(7)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=32, shuffle=True,
                                     generator=g, num_workers=int(os.environ.get("WORKERS", "0")))
model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Dropout(0.25), torch.nn.Linear(16, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
perturb = int(os.environ.get("PERTURB_STEP", "0"))
reseed = int(os.environ.get("RESEED_STEP", "0"))
inside = os.environ.get("RECORD_INSIDE")
if inside:
    import bitgrad.torch
recording = bitgrad.torch.record(inside) if inside else contextlib.nullcontext()
step = 0
with recording:
    for epoch in range(2):
        for x, y in loader:
            step += 1
            if step == reseed:
                torch.manual_seed(1234)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if step == perturb:
                with torch.no_grad():
                    model[0].weight[0, 0] += 1e-7
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            sched.step()
save = os.environ.get("SAVE_TO")
if save:
    arrays = {"x": x.numpy(), "loss": np.float32(loss.item())}
    arrays.update({"grad " + n: g.numpy() for n, g in grads.items()})
    arrays.update({"param " + n: p.detach().numpy() for n, p in model.named_parameters()})
    np.savez(save, **arrays)
print("steps", step)
"""

STEPS = 12  # 192 samples / 32 per batch, 2 epochs


def _env(**extra):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _launch(cwd, out, script, *args, env=None, options=()):
    return subprocess.run([sys.executable, "-m", "bitgrad.torch.record", "--out", str(out), *options, "--",
                           str(script), *args], cwd=str(cwd), env=env or _env(), capture_output=True, text=True,
                          timeout=300)


def _trace(run):
    with open(os.path.join(str(run), "trace.jsonl")) as f:
        return [json.loads(line) for line in f]


def _manifest(run):
    with open(os.path.join(str(run), "manifest.json")) as f:
        return json.load(f)


def _diff(a, b):
    return subprocess.run([BITGRAD_BIN, "diff", str(a), str(b), "--no-replay"], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The MLP script and two recordings of it (the first also saving its last step)."""
    d = tmp_path_factory.mktemp("torch_record")
    script = d / "train.py"
    script.write_text(MLP)
    runs = {}
    for name in ("a", "b"):
        extra = {"SAVE_TO": d / "last.npz"} if name == "a" else {}
        r = _launch(d, d / name, script, env=_env(**extra))
        assert r.returncode == 0, r.stderr
        assert "steps %d" % STEPS in r.stdout
        runs[name] = d / name
    return d, script, runs


def test_a_relative_out_survives_a_script_that_changes_directory(tmp_path):
    # --out runs/a given relative to where the recorder starts; the script moves elsewhere first
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "train.py").write_text("import os, sys\nos.chdir(sys.argv[1])\n" + MLP)
    r = _launch(tmp_path, "runs/a", tmp_path / "train.py", str(tmp_path / "elsewhere"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "steps %d" % STEPS in r.stdout
    assert len(_trace(tmp_path / "runs" / "a")) == STEPS
    assert not (tmp_path / "elsewhere" / "runs").exists()


def test_two_runs_are_identical(mlp):
    d, script, runs = mlp
    r = _diff(runs["a"], runs["b"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical: %d steps" % STEPS in r.stdout
    assert bitgrad.instruments.diff(str(runs["a"]), str(runs["b"]), replay=False, quiet=True)["identical"]
    ta, tb = _trace(runs["a"]), _trace(runs["b"])
    assert [t["step"] for t in ta] == list(range(1, STEPS + 1))
    assert ta == tb  # the extra keys too: optimizer state, RNG states, data order
    assert [(t["epoch"], t["batch"]) for t in ta] == [(e, b) for e in range(2) for b in range(6)]
    assert all(t["samples"] == 32 and len(t["indices"]) == 32 for t in ta)
    assert ta[0]["indices"] != ta[6]["indices"]  # the second epoch is shuffled anew
    assert [t["lr"] for t in ta][4:6] == [[0.01], [0.005]]  # StepLR made before recording: seen


def test_a_perturbed_weight_is_named_at_its_step(mlp):
    d, script, runs = mlp
    r = _launch(d, d / "perturbed", script, env=_env(PERTURB_STEP=3))
    assert r.returncode == 0, r.stderr
    r = _diff(runs["a"], d / "perturbed")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first difference: step 3, the updated parameter 0.weight" in r.stdout
    ta, tp = _trace(runs["a"]), _trace(d / "perturbed")
    assert ta[:2] == tp[:2]
    assert ta[2]["grad"] == tp[2]["grad"] and ta[2]["param"][1:] == tp[2]["param"][1:]
    assert not bitgrad.instruments.diff(str(runs["a"]), str(d / "perturbed"), replay=False, quiet=True)["identical"]


def test_another_dropout_seed_is_named_at_its_step(mlp):
    d, script, runs = mlp
    r = _launch(d, d / "reseeded", script, env=_env(RESEED_STEP=3))
    assert r.returncode == 0, r.stderr
    r = _diff(runs["a"], d / "reseeded")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first difference: step 3, the loss" in r.stdout
    ta, tr = _trace(runs["a"]), _trace(d / "reseeded")
    assert ta[2]["input"] == tr[2]["input"] and ta[2]["indices"] == tr[2]["indices"]  # same batch, other mask
    assert ta[2]["rng"]["torch"] != tr[2]["rng"]["torch"]
    calls = _manifest(d / "reseeded")["run"]["settings_calls"]
    assert {"call": "torch.manual_seed", "args": [1234], "step": 2, "site": "train.py:31"} in calls


def _xxh3_128():
    name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        pytest.skip("libxxhash is not loadable here (%s)" % name)

    class Digest(ctypes.Structure):
        _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]

    lib.XXH3_128bits.restype = Digest
    lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def digest(data):
        d = lib.XXH3_128bits(data, len(data))
        return "%016x%016x" % (d.high64, d.low64)

    return digest


_CODES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int64): 2, np.dtype(np.uint8): 3,
          np.dtype(np.bool_): 3, np.dtype(np.float16): 5}


def _spec_fingerprint(arrays, xxh3, code=None):
    """numerics §13 written out: per tensor its dtype code, ndim, dims (int64 LE), then its
    elements row-major and little-endian; XXH3-128 of it all, high word first."""
    data = b""
    for a in arrays:
        a = np.array(a, order="C")  # (ascontiguousarray would make a scalar 1-d)
        data += bytes([_CODES[a.dtype] if code is None else code, a.ndim]) + struct.pack("<%dq" % a.ndim, *a.shape)
        data += a.astype(a.dtype.newbyteorder("<")).tobytes()
    return xxh3(data)


def test_fingerprints_are_bitgrads(mlp):
    d, script, runs = mlp
    xxh3 = _xxh3_128()
    last = _trace(runs["a"])[-1]
    saved = np.load(str(d / "last.npz"))
    # an independent computation of the definition, and bitgrad's own tensors of the same bits
    for name, fp in last["param"]:
        arr = saved["param " + name]
        assert fp == _spec_fingerprint([arr], xxh3) == bitgrad.fingerprint(bitgrad.tensor(arr)), name
    for name, fp in last["grad"]:
        assert fp == _spec_fingerprint([saved["grad " + name]], xxh3), name
    assert last["input"] == _spec_fingerprint([saved["x"]], xxh3) == bitgrad.fingerprint(bitgrad.tensor(saved["x"]))
    assert last["loss"] == "0x%08x" % np.float32(saved["loss"]).view(np.uint32)
    assert [n for n, _ in last["param"]] == ["0.weight", "0.bias", "3.weight", "3.bias"]
    assert [n for n, _ in last["state"]][:3] == ["0.weight.exp_avg", "0.weight.exp_avg_sq", "0.weight.step"]


DTYPES = """
import json
import torch
import bitgrad.torch
f = bitgrad.torch.fingerprint
base = torch.arange(-3, 9, dtype=torch.float32).reshape(3, 4) / 4
cases = {
    "float32": base, "float32_transposed": base.t(), "float64": base.double(), "float16": base.half(),
    "bfloat16": base.to(torch.bfloat16), "int64": torch.arange(-3, 9).reshape(3, 4), "uint8": torch.arange(12, dtype=torch.uint8),
    "bool": torch.tensor([[True, False], [False, True]]), "scalar": torch.tensor(2.5), "zero": torch.tensor(0.0),
    "negative_zero": torch.tensor(-0.0), "strided": base[:, ::2], "requires_grad": base.clone().requires_grad_(),
    "int32": torch.arange(6, dtype=torch.int32), "int32_as_int64": torch.arange(6, dtype=torch.int64),
    "reshaped": base.reshape(4, 3), "list": [base, torch.arange(3)],
}
out = {k: f(v) for k, v in cases.items()}
# the recorder's one call per step: the same digests, and views that follow a tensor's changes
from bitgrad.torch._fingerprint import fingerprints
from bitgrad.torch import _rng
import numpy
out["batched"] = fingerprints(list(cases.values())) == [out[k] for k in cases]
p = torch.nn.Parameter(base.clone())
seen = [fingerprints([p])[0] == f(base)]
with torch.no_grad():
    p.mul_(2)
seen.append(fingerprints([p])[0] == f(base * 2))
p.data = base.t().clone()
seen.append(fingerprints([p])[0] == f(base.t()))
out["views"] = seen
# an optimizer's parameters and state: views kept and checked in bulk, made anew where a tensor,
# its memory, shape, strides or dtype changed; a dtype NumPy lacks hashed through a copy each time
from bitgrad.torch._fingerprint import KeptViews
kv = KeptViews()
q, s, b = torch.nn.Parameter(base.clone()), torch.zeros(3), torch.ones(2, dtype=torch.bfloat16)
kept = lambda *ts: fingerprints(kv.groups(list(ts)))
seen = [kept(q, s, b) == [f(base), f(torch.zeros(3)), f(b)]]
with torch.no_grad():
    q.mul_(2)
    b.mul_(3)
seen.append(kept(q, s, b) == [f(base * 2), f(torch.zeros(3)), f(torch.full([2], 3.0, dtype=torch.bfloat16))])
q.data = base.t().clone()
seen.append(kept(q, s, b) == [f(base.t()), f(torch.zeros(3)), f(b)])
s = torch.ones(3, dtype=torch.float64)
seen.append(kept(q, s, b) == [f(base.t()), f(s), f(b)])
q.data = q.data.reshape(12)
seen.append(kept(q, s, b) == [f(base.t().reshape(12)), f(s), f(b)])
out["kept"] = seen
g = _rng.Generators()
numpy.random.seed(3)
numpy.random.rand(5)
words = _rng._numpy_words(numpy.random.get_state()).view(numpy.uint8)
out["numpy_view"] = [g._numpy is not None, bool(numpy.array_equal(g.read()[1][1][0], words))]
out["bfloat16_bits"] = base.to(torch.bfloat16).view(torch.int16).numpy().astype("<u2").tolist()
print(json.dumps(out))
"""


def test_fingerprint_dtypes_and_layouts(tmp_path):
    xxh3 = _xxh3_128()
    (tmp_path / "dtypes.py").write_text(DTYPES)
    r = subprocess.run([sys.executable, str(tmp_path / "dtypes.py")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    base = (np.arange(-3, 9, dtype=np.float32).reshape(3, 4) / 4).astype(np.float32)
    spec = lambda *arrays, code=None: _spec_fingerprint(arrays, xxh3, code)  # noqa: E731
    assert got["float32"] == spec(base) == bitgrad.fingerprint(bitgrad.tensor(base))
    assert got["float32_transposed"] == spec(base.T)
    assert got["float64"] == spec(base.astype(np.float64))
    assert got["float16"] == spec(base.astype(np.float16))
    bf16 = np.array(got["bfloat16_bits"], dtype="<u2").reshape(3, 4)
    assert got["bfloat16"] == spec(bf16, code=4) == bitgrad.fingerprint(bitgrad.tensor(base).to(bitgrad.bfloat16))
    assert got["int64"] == spec(np.arange(-3, 9, dtype=np.int64).reshape(3, 4))
    assert got["uint8"] == spec(np.arange(12, dtype=np.uint8))
    assert got["bool"] == spec(np.array([[1, 0], [0, 1]], dtype=np.uint8))  # bool hashes as uint8
    assert got["scalar"] == spec(np.array(2.5, dtype=np.float32)) == bitgrad.fingerprint(bitgrad.scalar(2.5))
    assert got["zero"] != got["negative_zero"]
    assert got["strided"] == spec(base[:, ::2])
    assert got["requires_grad"] == got["float32"]
    assert got["reshaped"] != got["float32"]  # the shape enters
    assert got["int32"] != got["int32_as_int64"] == spec(np.arange(6, dtype=np.int64))  # the dtype enters
    assert got["list"] == spec(base, np.arange(3, dtype=np.int64))
    assert got["batched"] and got["views"] == [True, True, True]
    assert got["kept"] == [True] * 5
    assert got["numpy_view"] == [True, True]  # NumPy's Mersenne Twister read in place, as get_state() has it


def test_numpy_arrays_are_hashed_in_place_as_their_tensors():
    """The recorder's one call per step reads a C-contiguous array in place (no tensor made):
    the digests are numerics §13's, and the arrays it cannot read in place (strided ones) go
    through from_numpy as before; a dtype or byte order bitgrad lacks is refused by name."""
    xxh3 = _xxh3_128()
    ro = np.arange(6, dtype=np.float64)
    ro.flags.writeable = False
    cases = [np.array(2.5, dtype=np.float32), np.zeros((4, 0, 2)), np.arange(2.0).reshape(1, 1, 1, 2, 1, 1, 1, 1),
             np.arange(5, dtype="<i8"), ro, np.arange(12.0, dtype=np.float32).reshape(3, 4)[:, ::2],
             np.arange(7, dtype=np.uint8), np.array([True, False, True]), np.arange(-3, 3, dtype=np.float16) / 4,
             np.arange(3, dtype=np.float32)[::-1].copy()]
    got = bitgrad._bitgrad._fingerprints([[a] for a in cases] + [cases[:3]])
    assert got == [_spec_fingerprint([a], xxh3) for a in cases] + [_spec_fingerprint(cases[:3], xxh3)]
    assert got[:-1] == [bitgrad.fingerprint(bitgrad.tensor(a)) for a in cases]
    for bad, says in ((np.zeros(3, dtype=">f4"), "big-endian"), (np.zeros(3, dtype=np.int32), "int32")):
        with pytest.raises(bitgrad.InputError, match=says):
            bitgrad._bitgrad._fingerprints([[bad]])
    # a group that makes its items on access (an array's rows, a generator-backed sequence): each
    # item is held while it is read (it was freed under the reader, and crashed)
    rows = np.arange(12.0).reshape(3, 4)
    assert bitgrad._bitgrad._fingerprints([rows]) == bitgrad._bitgrad._fingerprints([list(rows)])
    assert bitgrad._bitgrad._hashed_line(("<", ">"), (rows,)) == "<%s>" % bitgrad._bitgrad._fingerprints([list(rows)])[0]
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got int64"):
        bitgrad._bitgrad._fingerprints([np.arange(3)])
    assert repr(np.arange(3)) == "array([0, 1, 2])"  # the heap intact after the refusal


def test_a_line_is_what_json_writes_for_its_record(tmp_path):
    """The recorder writes a step's record as text around its values in one call (_hashed_line):
    the line is json.dumps of the record's dict, names that need quoting and escaping included,
    the groups replaced by their fingerprints; with a descriptor, it is appended with its newline
    in one write, and a write that fails raises OSError with the file truncated back."""
    code = r"""
import json, os, sys
import numpy as np
from bitgrad import _bitgrad
from bitgrad.torch._fingerprint import Arrays, ZERO_DIGEST
from bitgrad.torch._recorder import _record_template

names = ("0.weight", 'q"uote', "back\\slash", "100%s", "d\u00e9j\u00e0 vu", "tab\tnew\nline")
labels = tuple(n + ".exp_avg" for n in names[:3])
rng = ("torch", "numpy", "python")
a = [np.arange(n + 1, dtype=np.float32) for n in range(len(names) + len(labels) + 1)]
grads = [ZERO_DIGEST if i == 2 else Arrays([a[i]]) for i in range(len(names))]
params = [Arrays([a[i], a[i + 1]]) for i in range(len(names))]
state = [Arrays([a[len(names) + i]]) for i in range(len(labels))]
rng_v = ["d" * 32, Arrays([a[-1]]), "e" * 32]
values = ["7", "1", "3", "f" * 32, "0x3f800000"] + grads + params + ["0", "7"] + state + rng_v + ["", "null", "42", "[0.001, 0.5]"]
line = _bitgrad._hashed_line(_record_template(names, names, labels, rng), values)
fp = lambda v: v if isinstance(v, str) else _bitgrad._fingerprints([v])[0]
rec = {"step": 7, "epoch": 1, "batch": 3, "input": "f" * 32, "loss": "0x3f800000",
       "grad": [[n, fp(g)] for n, g in zip(names, grads)], "param": [[n, fp(p)] for n, p in zip(names, params)],
       "optimizer": 0, "optimizer_step": 7, "state": [[n, fp(v)] for n, v in zip(labels, state)],
       "rng": dict(zip(rng, map(fp, rng_v))), "indices": "", "samples": None, "loader_seed": 42, "lr": [0.001, 0.5]}
assert line == json.dumps(rec), (line, json.dumps(rec))
empty = _bitgrad._hashed_line(_record_template((), (), (), ()), ["1", "0", "0", "", ""] + ["0", "1"] + ["", "null", "null", "[]"])
assert empty == json.dumps({"step": 1, "epoch": 0, "batch": 0, "input": "", "loss": "", "grad": [], "param": [],
                            "optimizer": 0, "optimizer_step": 1, "state": [], "rng": {}, "indices": "", "samples": None,
                            "loader_seed": None, "lr": []})
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
n = _bitgrad._hashed_line(["{", "}"], ["x"], fd, 0)
os.close(fd)
assert n == 4 and open(path).read() == "{x}\n"
fd = os.open(path, os.O_RDONLY)
try:
    _bitgrad._hashed_line(["{", "}"], ["y"], fd, 4)
    raise SystemExit("a failed write was not reported")
except OSError:
    pass
os.close(fd)
assert open(path).read() == "{x}\n"
try:
    _bitgrad._hashed_line(["{"], ["y"])
    raise SystemExit("a missing piece was not reported")
except Exception as e:
    assert "one more piece than values" in str(e), e
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "line.jsonl")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


GENERATORS = r"""
import random
import numpy as np
from bitgrad import _bitgrad
from bitgrad.torch import _rng

g = _rng.Generators()
assert g._python_view is not None  # CPython on a little-endian machine: read in place
packed = _rng.Generators()
packed._python_view = None  # the getstate() path
for draw in (lambda: None, random.random, lambda: random.gauss(0, 1), lambda: random.getrandbits(20000)):
    draw()
    a, b = g.read()[1][2], packed.read()[1][2]
    assert [x.tobytes() for x in a] == [x.tobytes() for x in b]
    assert _bitgrad._fingerprints([a]) == _bitgrad._fingerprints([b])
    assert len(a) == (1 if random._inst.gauss_next is None else 2)
print("ok")
"""


def test_pythons_generator_read_in_place_is_its_packed_state():
    """Python's random is read in place where CPython lays it out as checked at the start; the
    bytes, and so the digest, are those packed from random.getstate(), with gauss_next or
    without."""
    r = subprocess.run([sys.executable, "-c", GENERATORS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


INDICES = r"""
import numpy
import torch
from bitgrad import _bitgrad
from bitgrad.torch._recorder import _indices_item

class Odd:  # an index whose __index__ and __int__ disagree: NumPy reads __int__
    def __index__(self):
        return 7
    def __int__(self):
        return 107

def numpy_digest(lst):
    try:
        a = numpy.asarray(lst, dtype=numpy.int64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        return "refused"
    return _bitgrad._fingerprints([[a]])[0]

def recorded(lst):
    a, n = _indices_item([lst])
    assert n == len(lst)
    return "refused" if isinstance(a, str) else _bitgrad._fingerprints([[a]])[0]

for lst in ([3, 1, 2], list(range(128)), [True, 2], [numpy.int64(4), 5], [torch.tensor(3), 1], [1.0, 2.5],
            [2 ** 70], [-(2 ** 63), 2 ** 63 - 1], [Odd(), 1]):
    assert recorded(lst) == numpy_digest(lst), lst
print("ok")
"""


def test_sampler_indices_hash_as_numpy_reads_them():
    """A batch sampler's list of ints is packed without NumPy; anything else in the list (bools,
    NumPy ints, tensors, floats, ints beyond int64, objects whose __index__ and __int__ differ)
    hashes as NumPy's int64 conversion of it, as before."""
    r = subprocess.run([sys.executable, "-c", INDICES], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


KEPT_STATE = """
import json, os, random, sys
import numpy as np
import torch
import bitgrad.torch
from bitgrad.torch import _recorder

def train(out):
    random.seed(0); np.random.seed(0); torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    opts = [torch.optim.Adam(m[0].parameters(), lr=1.0, amsgrad=True), torch.optim.SGD(m[2].parameters(), lr=1.0, momentum=0.9)]
    with bitgrad.torch.record(out):
        for i in range(6):
            if i == 1:
                opts[1].param_groups[0]["lr"] = 1  # equal to the 1.0 just written, another JSON
            if i == 4:
                opts[1].param_groups[0]["lr"] = -0.0  # equal to 0.0, another JSON
            if i == 5:
                opts[1].param_groups[0]["lr"] = 0.0
            if i == 3:
                opts[0].add_param_group({"params": [torch.nn.Parameter(torch.ones(2))]})
            x = torch.randn(4, 6)
            for o in opts:
                o.zero_grad()
            m(x).square().mean().backward()
            for o in opts:
                o.step()
    return open(os.path.join(out, "trace.jsonl")).read()

fast = train(sys.argv[1])
_recorder.Recorder._kept_params_state = lambda self, info, opt: None  # every step through the general loop
slow = train(sys.argv[2])
assert fast == slow and fast.count("\\n") == 12, (fast, slow)
assert [fast.count('"lr": [%s]' % v) for v in ("1.0", "1", "-0.0", "0.0")] == [4, 3, 1, 1], fast
print("ok")
"""


def test_the_state_read_in_bulk_is_the_state_read_one_by_one(tmp_path):
    """Where the optimizer's state keeps its layout, parameters and state are read in a few
    passes; the records are those of the general loop, also across a parameter group added
    midway (a new layout) and a momentum buffer that appears after the first step. Learning
    rates that compare equal (1.0 and 1, -0.0 and 0.0) are written as each is."""
    r = subprocess.run([sys.executable, "-c", KEPT_STATE, str(tmp_path / "fast"), str(tmp_path / "slow")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


BATCHES = """
import sys, weakref
import torch
import bitgrad.torch

torch.manual_seed(0)
m = torch.nn.Linear(8, 2)
opt = torch.optim.Adam(m.parameters(), lr=0.1)
alive = []
with bitgrad.torch.record(sys.argv[1]):
    for i in range(3):
        x = torch.randn(16, 8)
        ref = weakref.ref(x)
        opt.zero_grad()
        m(x).square().mean().backward()
        opt.step()
        del x
        alive.append(ref() is not None)
print(alive)
"""


def test_the_recorder_keeps_no_batch_alive(tmp_path):
    # a batch kept to the next call made the allocator map fresh pages for every batch
    (tmp_path / "batches.py").write_text(BATCHES)
    r = subprocess.run([sys.executable, "batches.py", "run"], cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[False, False, False]"
    assert [x["input"] != "" for x in _trace(tmp_path / "run")] == [True] * 3


def test_context_manager_records_what_the_launcher_records(mlp):
    d, script, runs = mlp
    inside = d / "inside"
    r = subprocess.run([sys.executable, str(script)], cwd=str(d), env=_env(RECORD_INSIDE=inside),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert _trace(inside) == _trace(runs["a"])
    r = _diff(runs["a"], inside)
    assert r.returncode == 0 and "identical: %d steps" % STEPS in r.stdout, r.stdout + r.stderr
    run = _manifest(inside)["run"]
    assert run["exit"] == {"status": "completed"} and run["steps"] == STEPS
    # the seeds came before the `with`: only the launcher saw them
    assert run["settings_calls"] == []
    assert [c["call"] for c in _manifest(runs["a"])["run"]["settings_calls"]] == [
        "random.seed", "numpy.random.seed", "torch.manual_seed"]


def test_every_workers_and_thread_hashing(mlp):
    d, script, runs = mlp
    r = _launch(d, d / "every3", script, options=("--every", "3"))
    assert r.returncode == 0, r.stderr
    full = _trace(runs["a"])
    assert _trace(d / "every3") == [t for t in full if t["step"] % 3 == 0]
    r = _launch(d, d / "thread", script, options=("--hashing", "thread"))
    assert r.returncode == 0, r.stderr
    assert _trace(d / "thread") == full  # copies hashed on a background thread: the same records
    assert _manifest(d / "thread")["run"]["hashing"] == "thread"
    r = _launch(d, d / "workers2", script, env=_env(WORKERS=2))
    assert r.returncode == 0, r.stderr
    assert _trace(d / "workers2") == full  # the same batches, data order and worker seeds from 2 worker processes


def test_manifest(mlp):
    d, script, runs = mlp
    m = _manifest(runs["a"])
    assert {"bitgrad", "build", "machine", "environment", "torch", "python", "run"} <= set(m)
    assert {"cpu", "cpus", "arch", "os"} <= set(m["machine"])
    t = m["torch"]
    assert t["version"] == torch.__version__
    assert {"config", "parallel_info", "threads", "interop_threads", "deterministic_algorithms",
            "cudnn_deterministic", "cudnn_benchmark", "blas", "mkldnn", "openmp", "cpu_capability"} <= set(t)
    assert t["threads"] == m["run"]["threads"]
    run = m["run"]
    assert run["kind"] == "train" and run["source"] == "torch" and run["trace"] == "steps"
    assert run["script"]["path"] == str(script) and run["script"]["argv"] == []
    import hashlib

    assert run["script"]["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert run["parameters"] == [["0.weight", "[16, 12]"], ["0.bias", "[16]"], ["3.weight", "[3, 16]"], ["3.bias", "[3]"]]
    assert run["steps"] == run["recorded"] == STEPS and run["every"] == 1 and run["hashing"] == "inline"
    assert run["optimizers"][0]["class"] == "torch.optim.adam.Adam" and run["optimizers"][0]["steps"] == STEPS
    assert run["optimizers"][0]["param_groups"][0]["params"] == 4
    assert run["seed"] == 0 and run["exit"] == {"status": "completed"}
    assert run["settings_at_exit"]["threads"] == t["threads"]
    assert "bitgrad.torch.record --out" in run["command"]
    env = _env(PYTHONHASHSEED=3, CUBLAS_WORKSPACE_CONFIG=":4096:8")
    r = _launch(d, d / "env", script, env=env)
    assert r.returncode == 0, r.stderr
    assert {"PYTHONHASHSEED": "3", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}.items() <= \
        _manifest(d / "env")["environment"].items()
    r = _diff(runs["a"], d / "env")
    assert "environment.PYTHONHASHSEED" in r.stdout and r.returncode == 0, r.stdout + r.stderr


# ---- hostile input

RAISES = """
import sys
import torch
torch.manual_seed(0)
m = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
def check(i):
    if i == 2:
        raise ValueError("boom at step %d" % (i + 1))
for i in range(5):
    opt.zero_grad()
    m(torch.randn(4, 3)).sum().backward()
    opt.step()
    if sys.argv[1:] == ["exit"] and i == 1:
        sys.exit(3)
    check(i)
"""


def test_a_script_that_raises(tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    r = _launch(tmp_path, tmp_path / "run", "raises.py")
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert 'raises.py", line 9, in check' in r.stderr and "ValueError: boom at step 3" in r.stderr
    assert "bitgrad/torch" not in r.stderr  # the script's frames only, as python3 raises.py prints them
    assert [t["step"] for t in _trace(tmp_path / "run")] == [1, 2, 3]
    assert _manifest(tmp_path / "run")["run"]["exit"] == {"status": "exception", "exception": "ValueError: boom at step 3"}
    r = _launch(tmp_path, tmp_path / "exit", "raises.py", "exit")
    assert r.returncode == 3, r.stderr
    assert [t["step"] for t in _trace(tmp_path / "exit")] == [1, 2]
    assert _manifest(tmp_path / "exit")["run"]["exit"] == {"status": "exit", "code": 3}


def test_refusals(tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    r = _launch(tmp_path, tmp_path / "run", "missing.py")
    assert r.returncode == 2 and "cannot run missing.py: no such file; expected a Python script" in r.stderr
    assert not (tmp_path / "run").exists()
    r = _launch(tmp_path, tmp_path / "run", "raises.py", "exit")
    assert r.returncode == 3
    before = (tmp_path / "run" / "trace.jsonl").read_bytes()
    r = _launch(tmp_path, tmp_path / "run", "raises.py", "exit")
    assert r.returncode == 2
    assert "run already holds a run (trace.jsonl); choose another directory" in r.stderr
    assert (tmp_path / "run" / "trace.jsonl").read_bytes() == before
    for options, message in ((["--every", "0"], "--every: expected a positive integer, got '0'"),
                             (["--hashing", "later"], "--hashing: expected inline or thread, got 'later'"),
                             (["--bogus"], "unknown option --bogus"), ([], "expected the script to run")):
        args = [sys.executable, "-m", "bitgrad.torch.record", "--out", str(tmp_path / "x"), *options]
        if options:
            args += ["--", "raises.py"]
        r = subprocess.run(args, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert "usage: python3 -m bitgrad.torch.record" in r.stderr


def test_a_script_without_optimizer(tmp_path):
    (tmp_path / "eval.py").write_text("import torch\nprint(torch.nn.Linear(2, 2)(torch.ones(1, 2)).shape)\n")
    r = _launch(tmp_path, tmp_path / "run", "eval.py")
    assert r.returncode == 0, r.stderr
    assert "made no optimizer step" in r.stderr
    assert _trace(tmp_path / "run") == []
    run = _manifest(tmp_path / "run")["run"]
    assert run["steps"] == 0 and run["parameters"] == [] and run["optimizers"] == []


TWO = """
import torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
D = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
og = torch.optim.Adam(G.parameters(), lr=1e-3)
od = torch.optim.SGD(D.parameters(), lr=1e-2)
bce = torch.nn.BCEWithLogitsLoss()
for i in range(3):
    z = torch.randn(16, 4)
    fake = G(z)
    od.zero_grad()
    ld = bce(D(torch.randn(16, 2) + 3), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
    ld.backward()
    od.step()
    og.zero_grad()
    lg = bce(D(fake), torch.ones(16, 1))
    lg.backward()
    og.step()
    if i == 2:
        import bitgrad.torch, numpy
        numpy.save("z.npy", z.numpy())
        print(bitgrad.torch.fingerprint(z), "0x%08x" % numpy.float32(lg.item()).view(numpy.uint32))
"""


THREADS = """
import threading, torch
torch.manual_seed(0)

def train(seed):
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(20):
        x = torch.randn(256, 64, generator=g)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

threads = [threading.Thread(target=train, args=(s,)) for s in (1, 2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
"""


def test_two_threads_stepping_their_own_optimizers_number_every_step_once(tmp_path):
    # each optimizer's step takes its number when it starts: no two steps share one, none is lost
    (tmp_path / "threads.py").write_text(THREADS)
    for k in range(3):
        out = tmp_path / ("run%d" % k)
        r = _launch(tmp_path, out, tmp_path / "threads.py")
        assert r.returncode == 0, r.stdout + r.stderr
        steps = sorted(rec["step"] for rec in _trace(out))
        assert steps == list(range(1, 41)), steps
        assert _manifest(out)["run"]["steps"] == 40


SPLIT = """
import numpy, torch, bitgrad.torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
first = torch.optim.SGD(model[0].parameters(), lr=0.1)
second = torch.optim.Adam(model[2].parameters(), lr=0.01)
for i in range(2):
    x = torch.randn(6, 5)
    loss = model(x).square().mean()
    first.zero_grad()
    second.zero_grad()
    loss.backward()
    first.step()
    second.step()
    print(bitgrad.torch.fingerprint(x), "0x%08x" % numpy.float32(loss.item()).view(numpy.uint32))
"""


def test_two_optimizers(tmp_path):
    (tmp_path / "gan.py").write_text(TWO)
    r = _launch(tmp_path, tmp_path / "run", "gan.py")
    assert r.returncode == 0, r.stderr
    t = _trace(tmp_path / "run")
    assert [(x["step"], x["optimizer"], x["optimizer_step"]) for x in t] == [
        (1, 0, 1), (2, 1, 1), (3, 0, 2), (4, 1, 2), (5, 0, 3), (6, 1, 3)]
    assert [n for n, _ in t[0]["param"]] == ["0.weight", "0.bias", "2.weight", "2.bias"]  # D, the first to step
    assert [n for n, _ in t[1]["param"]] == ["opt1.0.weight", "opt1.0.bias", "opt1.2.weight", "opt1.2.bias"]
    z_fp, lg_bits = r.stdout.split()
    assert t[5]["input"] == z_fp and t[5]["loss"] == lg_bits  # G's optimizer: G's input, G's loss
    run = _manifest(tmp_path / "run")["run"]
    assert [(o["index"], o["class"], o["steps"]) for o in run["optimizers"]] == [
        (0, "torch.optim.sgd.SGD", 3), (1, "torch.optim.adam.Adam", 3)]
    assert len(run["parameters"]) == 8
    # one forward and one loss for two optimizers of one model's halves: both records have them
    (tmp_path / "split.py").write_text(SPLIT)
    r = _launch(tmp_path, tmp_path / "split", "split.py")
    assert r.returncode == 0, r.stderr
    t = _trace(tmp_path / "split")
    seen = [line.split() for line in r.stdout.split("\n") if line]
    assert [(x["optimizer"], x["input"], x["loss"]) for x in t] == [
        (0, seen[0][0], seen[0][1]), (1, seen[0][0], seen[0][1]), (0, seen[1][0], seen[1][1]), (1, seen[1][0], seen[1][1])]
    assert [n for n, _ in t[0]["param"]] == ["0.weight", "0.bias"] and [n for n, _ in t[1]["param"]] == ["2.weight", "2.bias"]


def test_stub_matches_module(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        from test_stubs import _differences
        problems = _differences("bitgrad.torch", "torch/__init__.pyi")
        print("\\n".join(problems))
        sys.exit(1 if problems else 0)
    """ % str(SOURCE_DIR / "tests" / "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


CUSTOM = """
import sys
import numpy
import torch
import torch.nn.functional as F
import bitgrad.torch

torch.manual_seed(0)


class Plain(torch.optim.Optimizer):  # defined before any recording
    def __init__(self, params, lr):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g["params"]:
                p.add_(p.grad, alpha=-g["lr"])
        return "plain"


m = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
for out in sys.argv[1:]:
    with bitgrad.torch.record(out):
        class Later(Plain):  # defined while recording; its super().step() is the same step
            def step(self, closure=None):
                return super().step(closure)

        for o in (Plain(m.parameters(), 0.1), Later(m.parameters(), 0.1)):
            o.zero_grad()
            F.mse_loss(m(x), y).backward()
            assert o.step() == "plain"  # the script's own step and its return value
        lbfgs = torch.optim.LBFGS(m.parameters(), max_iter=3)

        def closure():
            lbfgs.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            return loss

        loss = lbfgs.step(closure)
        print("0x%08x" % numpy.float32(loss.item()).view(numpy.uint32), bitgrad.torch.fingerprint(m.weight))
"""


def test_script_optimizers_closures_and_two_recordings(tmp_path):
    (tmp_path / "custom.py").write_text(CUSTOM)
    r = subprocess.run([sys.executable, "custom.py", "first", "second"], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    for k, run in enumerate(("first", "second")):
        t = _trace(tmp_path / run)
        assert [(x["step"], x["optimizer"]) for x in t] == [(1, 0), (2, 1), (3, 2)]  # Later's super() is no step
        loss_bits, weight = lines[k].split()
        assert t[2]["loss"] == loss_bits  # what step(closure) returned
        assert t[2]["param"][0] == ["weight", weight]  # one tensor, one name, whichever optimizer steps it
        assert [o["class"] for o in _manifest(tmp_path / run)["run"]["optimizers"]] == [
            "__main__.Plain", "__main__.Later", "torch.optim.lbfgs.LBFGS"]
    assert _trace(tmp_path / "first")[0]["param"] != _trace(tmp_path / "second")[0]["param"]


ABANDONED = """
import os, signal, sys
import torch
import bitgrad.torch

torch.manual_seed(0)
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
rec = bitgrad.torch.Recorder(sys.argv[1]).start()  # never closed
for i in range(6):
    opt.zero_grad()
    m(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_unclosed_or_killed_recording_leaves_a_readable_run(tmp_path):
    (tmp_path / "abandoned.py").write_text(ABANDONED)
    r = subprocess.run([sys.executable, "abandoned.py", "exits", "exit"], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in _trace(tmp_path / "exits")] == list(range(1, 7))  # written at exit
    run = _manifest(tmp_path / "exits")["run"]
    assert run["exit"] == {"status": "interpreter exit"} and run["steps"] == 6
    r = subprocess.run([sys.executable, "abandoned.py", "killed", "kill"], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == -9
    text = (tmp_path / "killed" / "trace.jsonl").read_text()
    assert text == "" or text.endswith("\n")  # complete lines only: at most the last pending steps are lost
    steps = [t["step"] for t in _trace(tmp_path / "killed")]
    assert steps == list(range(1, len(steps) + 1))
    r = _diff(tmp_path / "killed", tmp_path / "exits")
    assert r.returncode in (0, 1), r.stdout + r.stderr  # comparable: not a damaged trace (2)
    assert "identical over the %d steps both traced" % len(steps) in r.stdout or len(steps) == 6


FAILING = """
import torch
torch.manual_seed(0)


class Opaque:
    def __repr__(self):
        raise RuntimeError("no repr")


class Marking(torch.optim.SGD):
    def step(self, closure=None):
        out = super().step(closure)
        if self.state.get("steps", 0) >= 2:
            for g in self.param_groups:
                for p in g["params"]:
                    self.state[p]["opaque"] = Opaque()  # a state value the recorder cannot hash
        self.state["steps"] = self.state.get("steps", 0) + 1
        return out


m = torch.nn.Linear(3, 1)
opt = Marking(m.parameters(), lr=0.1)
for i in range(5):
    opt.zero_grad()
    m(torch.ones(2, 3)).sum().backward()
    opt.step()
print("trained", m.weight.sum().item())
"""


def test_a_failing_recorder_leaves_the_script_alone(tmp_path):
    (tmp_path / "failing.py").write_text(FAILING)
    plain = subprocess.run([sys.executable, "failing.py"], cwd=str(tmp_path), capture_output=True, text=True,
                           timeout=300)
    r = _launch(tmp_path, tmp_path / "run", "failing.py")
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert "bitgrad.torch.record: recording stopped: RuntimeError: no repr (at step 3)" in r.stderr
    assert [t["step"] for t in _trace(tmp_path / "run")] == [1, 2]  # the steps before it
    run = _manifest(tmp_path / "run")["run"]
    assert run["recording_error"] == "RuntimeError: no repr (at step 3)" and run["exit"] == {"status": "completed"}
