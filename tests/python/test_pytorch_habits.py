"""Issue 30, item 5: dim= as axis=, numbers as second arguments, clamp(min=), .T and .mT on N-d,
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
    assert "no keyword 'axes'" in msg and "accepted: sum(x: bitgrad.Tensor, axis: object = None, keepdim: bool = False)" in msg, msg
    assert "incompatible function arguments" not in msg
    with pytest.raises(TypeError) as e:
        bg.matmul(bg.ones(2, 2), "a")
    assert "called with (Tensor, str)" in str(e.value) and "accepted: matmul(a: bitgrad.Tensor, b: bitgrad.Tensor)" in str(e.value)
    with pytest.raises(TypeError) as e:
        bg.ones(2).sum(keepdim="x")
    assert "accepted" in str(e.value)
    with pytest.raises(TypeError) as e:
        bg.nn.Linear(2, 3, sed=1)
    assert "no keyword 'sed'" in str(e.value) and "seed" in str(e.value), str(e.value)
