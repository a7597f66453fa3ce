"""The contract fuzzer's Python side for shared parameters (numerics.md §10, "Uses"): Hypothesis
(derandomized: a run is the same every time) draws small Python models built from the idioms that
use a parameter twice — a layer called twice, a submodule registered under two names, an LM head
tied to its embedding (`head.weight = tok.weight`), an embedding looked up twice, a custom
bitgrad.autograd.Function — and checks each against the whole matrix in one process: the whole
batch in one backward against accumulate 2 and 4 (strict), Accumulator, DataParallel in one
process, 1 and 2 threads, the scalar code path, and a run resumed from safetensors. Two ranks are
tests/python/test_shared_parameters.py's. Examples per run: BITGRAD_SHARING_EXAMPLES (40 in the
suite; `make contract-python` runs 2000)."""
import os

import numpy as np
import pytest

import bitgrad as bg
from bitgrad import distributed as dist
from bitgrad import nn

from shared_models import LinearFn

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("BITGRAD_SHARING_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
V, F, T, C = 13, 7, 3, 5


class Drawn(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self._spec = spec
        d = spec["dim"]
        if spec["tokens"]:
            self.tok = nn.Embedding(V, d)
        else:
            self.inp = nn.Linear(F, d)
        for i, idiom in enumerate(spec["idioms"]):
            if idiom in ("twice", "alias"):
                setattr(self, "l%d" % i, nn.Linear(d, d))
                if idiom == "alias":
                    setattr(self, "a%d" % i, getattr(self, "l%d" % i))
            elif idiom == "function":
                setattr(self, "w%d" % i, nn.Parameter(bg.randn(d, d) * 0.3))
                setattr(self, "b%d" % i, nn.Parameter(bg.randn(d) * 0.1))
        if spec["tokens"] and spec["tied"]:
            self.head = nn.Linear(d, V, bias=False)
            self.head.weight = self.tok.weight
        else:
            self.head = nn.Linear(d, C)

    def forward(self, x):
        s = self._spec
        h = self.tok(x) if s["tokens"] else bg.tanh(self.inp(x))
        for i, idiom in enumerate(s["idioms"]):
            if idiom == "twice":
                layer = getattr(self, "l%d" % i)
                h = bg.tanh(layer(bg.tanh(layer(h))))
            elif idiom == "alias":
                h = bg.tanh(getattr(self, "a%d" % i)(bg.tanh(getattr(self, "l%d" % i)(h))))
            elif idiom == "function":
                h = bg.tanh(LinearFn.apply(h, getattr(self, "w%d" % i), getattr(self, "b%d" % i)))
            elif idiom == "lookup" and s["tokens"]:
                h = h + self.tok(x)  # the embedding's second use
        out = self.head(h)
        return bg.sum(out, 1) if s["tokens"] else out


def batch(spec, seed):
    r = np.random.RandomState(seed)
    n = spec["rows"]
    x = r.randint(0, V, size=(n, T)).astype(np.int64) if spec["tokens"] else r.randn(n, F).astype(np.float32)
    classes = V if spec["tokens"] and spec["tied"] else C
    return bg.tensor(x), bg.tensor(r.randint(0, classes, size=n).astype(np.int64))


def make(spec, seed=None):
    bg.manual_seed(spec["seed"] if seed is None else seed)
    return Drawn(spec)


def pieces(x, y, k):
    n = x.shape[0] // k
    return [(x[i * n:(i + 1) * n], y[i * n:(i + 1) * n]) for i in range(k)]


def grads(m):
    return [bg.fingerprint(p.grad) for p in m.parameters()]


def xent(m):
    return lambda a, b, r: bg.cross_entropy(m(a), b, reduction="sum")


specs = st.fixed_dictionaries({
    "seed": st.integers(0, 2 ** 31),
    "tokens": st.booleans(),
    "tied": st.booleans(),
    "dim": st.integers(2, 12),
    "rows": st.sampled_from([64, 128, 256]),
    "idioms": st.lists(st.sampled_from(["twice", "alias", "function", "lookup"]), min_size=1, max_size=3),
})


@SETTINGS
@given(spec=specs)
def test_a_drawn_model_with_shared_parameters_keeps_the_contract(spec, tmp_path):
    m = make(spec)
    x, y = batch(spec, spec["seed"] + 1)
    rows = spec["rows"]
    m.zero_grad()
    loss = bg.cross_entropy(m(x), y)
    loss.backward()
    want = (loss.item(), grads(m))
    for k in [k for k in (2, 4) if rows // k % 32 == 0]:  # micro-batches of whole 32-sample blocks
        for threads in (1, 2):
            bg.set_num_threads(threads)
            m.zero_grad()
            got = bg.accumulate(m, pieces(x, y, k), xent(m), strict=True)
            assert (got.item(), grads(m)) == want, (spec, k, threads)
    bg.set_num_threads(2)
    m.zero_grad()
    acc = bg.Accumulator(m, rows)
    for a, b in pieces(x, y, 2):
        acc.backward(bg.cross_entropy(m(a), b, reduction="sum"), a.shape[0])
    assert acc.finish().item() == want[0] and acc.whole_batch and grads(m) == want[1], spec
    m.zero_grad()
    dp = dist.DataParallel(m, rows, accumulate=2)
    assert dp.step((x, y), xent(m)).item() == want[0] and dp.whole_batch and grads(m) == want[1], spec
    isa = bg.get_isa()
    bg.set_isa("scalar")
    try:
        m.zero_grad()
        bg.accumulate(m, pieces(x, y, 2), xent(m), strict=True)
        assert grads(m) == want[1], (spec, "scalar")
    finally:
        bg.set_isa(isa)

    # resume: two steps straight against one, a save and a load into another model, one more
    def steps(model, opt, seeds):
        for s in seeds:
            opt.zero_grad()
            bg.accumulate(model, pieces(*batch(spec, s), 2), xent(model), strict=True)
            opt.step()
    m = make(spec)
    opt = bg.optim.Adam(m, lr=0.01)
    steps(m, opt, [7, 8])
    straight = bg.fingerprint(m)
    m = make(spec)
    opt = bg.optim.Adam(m, lr=0.01)
    steps(m, opt, [7])
    state = opt.state_dict()
    n = state.pop("steps")
    bg.io.save_safetensors(str(tmp_path / "m.safetensors"), m.state_dict())
    bg.io.save_safetensors(str(tmp_path / "o.safetensors"), state, {"steps": str(n)})
    m = make(spec, seed=spec["seed"] + 99)
    opt = bg.optim.Adam(m, lr=0.01)
    m.load_state_dict(bg.io.load_safetensors(str(tmp_path / "m.safetensors"))[0])
    st_, meta = bg.io.load_safetensors(str(tmp_path / "o.safetensors"))
    opt.load_state_dict(dict(st_, steps=int(meta["steps"])))
    steps(m, opt, [8])
    assert bg.fingerprint(m) == straight, spec
