"""dim= as axis=, numbers as second arguments, clamp(min=), .T and .mT on N-d,
stack, randn/rand/*_like, and wrong keywords or types naming what is accepted."""
import numpy as np
import pytest

import bitgrad as bg


def fp(x):
    return bg.fingerprint(x)


def test_dim_is_axis():
    x = bg.randn(3, 4, seed=1)
    assert fp(bg.sum(x, dim=1)) == fp(bg.sum(x, axis=1))
    assert fp(x.sum(dim=0)) == fp(x.sum(axis=0))
    assert fp(bg.softmax(x, dim=-1)) == fp(bg.softmax(x, axis=-1))
    assert fp(x.softmax(dim=0)) == fp(x.softmax(0))
    assert fp(bg.concat([x, x], dim=0)) == fp(bg.concat([x, x], axis=0))
    assert fp(bg.stack([x, x], dim=1)) == fp(bg.stack([x, x], axis=1))
    assert fp(x.mean(dim=1, keepdim=True)) == fp(x.mean(axis=1, keepdim=True))
    with pytest.raises(TypeError, match="not both"):
        bg.sum(x, axis=0, dim=0)


def test_numbers_as_second_arguments():
    x = bg.tensor([-1.0, 0.5, 2.0])
    assert bg.maximum(x, 0.0).tolist() == [0.0, 0.5, 2.0]
    assert bg.minimum(x, 1.0).tolist() == [-1.0, 0.5, 1.0]
    mask = bg.tensor([1, 0, 1], dtype=bg.uint8)
    assert bg.where(mask, x, 0.0).tolist() == [-1.0, 0.0, 2.0]
    assert bg.where(mask, 9, x).tolist() == [9.0, 0.5, 9.0]
    d = bg.tensor([1.0, 2.0, 3.0], dtype=bg.float64)
    assert bg.where(mask, d, -1).dtype == bg.float64
    assert bg.clamp(x, min=0.0).tolist() == [0.0, 0.5, 2.0]
    assert x.clamp(max=1.0).tolist() == [-1.0, 0.5, 1.0]


def test_transposes_on_nd():
    x = bg.arange(24).reshape(2, 3, 4)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert x.T.shape == (4, 3, 2) and np.array_equal(x.T.numpy(), a.T)
    assert x.mT.shape == (2, 4, 3) and np.array_equal(x.mT.numpy(), np.swapaxes(a, -1, -2))
    m = bg.arange(6).reshape(2, 3)
    assert m.T.shape == (3, 2) and m.mT.shape == (3, 2)
    with pytest.raises(bg.InputError, match="mT: needs at least 2 dimensions"):
        bg.ones(3).mT  # noqa: B018


def test_factories():
    x = bg.ones(2, 3, dtype=bg.float64)
    assert bg.zeros_like(x).dtype == bg.float64 and bg.zeros_like(x).shape == (2, 3)
    assert bg.ones_like(x).tolist() == [[1.0] * 3] * 2
    assert bg.full_like(x, 7).tolist() == [[7.0] * 3] * 2
    assert bg.empty_like(x).shape == (2, 3)
    assert bg.randn_like(x).dtype == bg.float64 and bg.rand(2, 2).shape == (2, 2)
    assert bg.stack([x, x]).shape == (2, 2, 3)


def test_wrong_keyword_or_type_names_what_is_accepted():
    with pytest.raises(TypeError) as e:
        bg.sum(bg.ones(2), axes=0)
    msg = str(e.value)
    # the signature the stub declares (__init__.pyi), its private aliases written out
    assert "no keyword 'axes'" in msg and "accepted: sum(x: Tensor, axis: Union[None, int, Sequence[int]] = None, keepdim: bool = False)" in msg, msg
    assert "incompatible function arguments" not in msg
    with pytest.raises(TypeError) as e:
        bg.matmul(bg.ones(2, 2), "a")
    assert "called with (Tensor, str)" in str(e.value) and "accepted: matmul(a: Tensor, b: Tensor)" in str(e.value)
    with pytest.raises(TypeError) as e:
        bg.ones(2).sum(keepdim="x")
    assert "accepted: Tensor.sum(axis: Union[None, int, Sequence[int]] = None, keepdim: bool = False)" in str(e.value), str(e.value)
    with pytest.raises(TypeError, match=r"reshape: expected a shape \(ints, or one sequence of ints\), got str"):
        bg.ones(2, 3).reshape("a")  # was pybind11's RuntimeError "Unable to cast Python instance of type <class 'str'>"
    with pytest.raises(TypeError) as e:
        bg.ones(2, 3).permute(axes=1)
    assert "no keyword 'axes'" in str(e.value) and "Tensor.permute(" in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        bg.nn.Linear(2, 3, sed=1)
    assert "no keyword 'sed'" in str(e.value) and "accepted: Linear(in_features: int, out_features: int" in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        bg.nn.Conv1d(2, 3, 3, padd=1)  # an alias's signature in the stub (Conv1d and Conv2d share theirs)
    assert "no keyword 'padd'" in str(e.value) and "Conv1d(in_channels: int" in str(e.value), str(e.value)
    assert bg.sum(bg.ones(2, 3), dim=1).shape == (2,)  # dim= where the stub declares axis


# Issue "Nothing differs silently on a model a user brings": where a PyTorch habit meant something
# else in bitgrad with no error, it now means what it means in PyTorch, or raises.

def _torch():
    return pytest.importorskip("torch")


def _xent_case(N=3, T=5, C=4, seed=7):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((N, T, C)) * 2.0
    targets = rng.integers(0, C, size=(N, T))
    return logits, targets


def _f64_bound(logits):
    # both sides in float64: each per-position loss is a log-sum-exp of C terms and a difference,
    # each reduction a sum of at most N * T of them; gamma(n) of the terms' magnitudes, twice (both
    # implementations), bounds the difference (parity_bounds.py)
    import parity_bounds as pb
    N, T, C = logits.shape
    terms = float(np.sum(np.abs(logits))) + N * T * (np.log(C) + 2 * np.max(np.abs(logits)))
    return 2 * pb.gamma(N * T * C + 16, pb.U64) * terms


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_sequence_cross_entropy_reduces_as_pytorch(reduction):
    torch = _torch()
    logits, targets = _xent_case()
    bound = _f64_bound(logits)
    want = torch.nn.functional.cross_entropy(torch.tensor(logits).permute(0, 2, 1), torch.tensor(targets), reduction=reduction)
    # bitgrad's [N, T, C] and PyTorch's own [N, C, T] (told apart by the targets [N, T]) alike
    for x in (bg.tensor(logits, dtype=bg.float64), bg.tensor(np.ascontiguousarray(logits.transpose(0, 2, 1)), dtype=bg.float64)):
        x.requires_grad_(True)
        got = bg.cross_entropy(x, bg.tensor(targets), reduction=reduction)
        assert got.shape == tuple(want.shape), (reduction, got.shape, tuple(want.shape))
        assert np.max(np.abs(got.detach().numpy() - want.detach().numpy())) <= bound, reduction
    # the gradient too: PyTorch's of the same reduction
    tl = torch.tensor(logits, requires_grad=True)
    tw = torch.nn.functional.cross_entropy(tl.permute(0, 2, 1), torch.tensor(targets), reduction=reduction)
    (tw.sum() if reduction == "none" else tw).backward()
    x = bg.tensor(logits, dtype=bg.float64).requires_grad_(True)
    y = bg.cross_entropy(x, bg.tensor(targets), reduction=reduction)
    (y.sum() if reduction == "none" else y).backward()
    assert np.max(np.abs(x.grad.numpy() - tl.grad.numpy())) <= bound, reduction


def test_sequence_cross_entropy_refuses_a_layout_it_cannot_tell():
    logits, targets = _xent_case(T=4, C=4)
    x = bg.tensor(logits, dtype=bg.float64)
    with pytest.raises(bg.InputError, match=r"ambiguous: PyTorch's \[N, C, T\] and bitgrad's \[N, T, C\].*classes_axis=1"):
        bg.cross_entropy(x, bg.tensor(targets))
    last = bg.cross_entropy(x, bg.tensor(targets), classes_axis=-1)
    first = bg.cross_entropy(bg.tensor(np.ascontiguousarray(logits.transpose(0, 2, 1)), dtype=bg.float64), bg.tensor(targets), classes_axis=1)
    assert last.item() == first.item()


def test_accumulate_of_a_sequence_loss_gives_the_whole_batchs_mean():
    # python.md's recipe with token labels [N, T]: the micro-batches' summed losses over N * T
    # (accumulate's default divisor) are the whole batch's mean, bits and gradients included
    from bitgrad import nn
    rng = np.random.default_rng(3)
    X = bg.tensor(rng.standard_normal((256, 6, 5)).astype(np.float32))
    Y = bg.tensor(rng.integers(0, 7, size=(256, 6)))
    model = nn.Linear(5, 7, seed=2)
    whole = bg.cross_entropy(model(X), Y)
    whole.backward()
    want = bg.fingerprint([p.grad for p in model.parameters()])
    model.zero_grad()
    micro = [(X[i:i + 64], Y[i:i + 64]) for i in range(0, 256, 64)]
    got = bg.accumulate(model, micro, lambda x, y, row: bg.cross_entropy(model(x), y, reduction="sum"))
    assert got.item() == whole.item()
    assert bg.fingerprint([p.grad for p in model.parameters()]) == want


def test_max_and_min_along_a_dim_return_values_and_indices():
    torch = _torch()
    a = np.array([[1.0, 5.0, 5.0], [7.0, -2.0, 0.0]], dtype=np.float32)  # two rows: unpacking rows would also "work"
    x, t = bg.tensor(a), torch.tensor(a)
    for got, want in ((x.max(1), t.max(1)), (bg.max(x, 1), torch.max(t, 1)), (x.min(0), t.min(0)), (bg.min(x, axis=0), torch.min(t, 0))):
        v, i = got
        assert v.tolist() == want.values.tolist() and i.tolist() == want.indices.tolist()
        assert got.values.tolist() == want.values.tolist() and got.indices.dtype == bg.int64
    assert x.max(1, keepdim=True).values.shape == (2, 1)
    assert x.max().item() == 7.0  # without a dim: the value alone, as PyTorch


def test_in_place_arithmetic_updates_a_parameter_under_no_grad_and_is_refused_outside():
    from bitgrad import nn
    m = nn.Linear(3, 2, seed=1)
    m(bg.ones(1, 3)).sum().backward()
    p = m.weight
    before, g = p.detach().numpy().copy(), p.grad.numpy().copy()
    with bg.no_grad():
        p -= 0.5 * p.grad  # the PyTorch habit: SGD by hand
    assert np.array_equal(m.weight.detach().numpy(), before - np.float32(0.5) * g), "the module's parameter itself changed"
    with pytest.raises(bg.AutogradError, match=r"x -= y: in place on a tensor that requires grad \(a leaf"):
        p -= 1.0
    y = bg.ones(2)
    y += 1.0
    y *= bg.tensor([2.0, 3.0])
    y /= 2.0
    assert y.tolist() == [2.0, 3.0]
    with pytest.raises(bg.InputError, match="does not fit x"):
        y += bg.ones(2, 2)
    # y += layer(x) in a forward: PyTorch records it; bitgrad would lose the gradient, so it raises
    h = bg.zeros(1, 2)
    with pytest.raises(bg.AutogradError, match="y requires grad"):
        h += m(bg.ones(1, 3))
    with bg.no_grad():
        h += m(bg.ones(1, 3))  # nothing is recorded: allowed


def test_modules_start_in_training_mode():
    torch = _torch()
    from bitgrad import nn
    assert torch.nn.Linear(2, 2).training and torch.nn.Sequential(torch.nn.Linear(2, 2)).training
    m = nn.Sequential(nn.Linear(4, 4, seed=1), nn.Dropout(0.5))
    assert m.training and nn.Linear(2, 2).training and nn.BatchNorm1d(3).training
    x = bg.ones(8, 4)
    y = m(x)  # a top-level call in training mode: dropout fires
    assert np.any(y.detach().numpy() == 0.0)
    m.eval()
    e = m(x).detach().numpy()
    assert not m.training and not np.any(e == 0.0) and np.array_equal(e, m(x).detach().numpy())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_a_recurrent_layer_returns_pytorchs_tuple(kind):
    from bitgrad import nn
    m = getattr(nn, kind)(3, 4, batch_first=True, seed=1)
    x = bg.randn(2, 5, 3, seed=2)
    out, state = m(x)  # batch 2: unpacking the rows of a tensor would also "work"
    assert out.shape == (2, 5, 4)
    if kind == "LSTM":
        h, c = state
        assert h.shape == (1, 2, 4) and c.shape == (1, 2, 4)
    else:
        assert state.shape == (1, 2, 4)
    assert bg.fingerprint(out) == bg.fingerprint(m.run(x)[0])
    last = getattr(nn, kind)(3, 4, batch_first=True, last_only=True, seed=1)
    assert last(x).shape == (2, 4)
