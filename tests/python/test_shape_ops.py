"""The shape, index and factory ops from Python, where the PyTorch parity cases
(test_parity_ops.py) cannot reach: the random factories' keying, one_hot, arange's two forms,
eye, the integer paths, ties and NaN in sort/topk, and the errors."""
import numpy as np
import pytest

import bitgrad as bg


def test_random_factories_are_keyed_by_seed_stream_and_index():
    a = bg.randn(3, 4, seed=7)
    assert a.shape == (3, 4) and a.dtype == bg.float32
    assert np.array_equal(a.numpy(), bg.randn((3, 4), seed=7).numpy())
    # element k is draw first_index + k: a tensor drawn in two parts is the one drawn whole
    tail = bg.randn(4, seed=7, first_index=8)
    assert np.array_equal(a.numpy().reshape(-1)[8:], tail.numpy())
    assert not np.array_equal(a.numpy(), bg.randn(3, 4, seed=7, stream=1).numpy())
    assert not np.array_equal(a.numpy(), bg.randn(3, 4, seed=8).numpy())
    u = bg.rand(1000, seed=1, dtype=bg.float64).numpy()
    assert u.dtype == np.float64 and u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    x = bg.zeros(2, 5, dtype=bg.float64)
    assert np.array_equal(bg.randn_like(x, seed=3).numpy(), bg.randn(2, 5, seed=3, dtype=bg.float64).numpy())
    assert np.array_equal(bg.rand_like(x, seed=3).numpy(), bg.rand(2, 5, seed=3, dtype=bg.float64).numpy())
    n = bg.randn(20000, seed=2, dtype=bg.float64).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05


def test_one_hot_follows_onnx():
    i = bg.tensor([0, -1, 5, 2])
    assert bg.one_hot(i, 3).tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 1]]
    h = bg.one_hot(i, 3, axis=0, off=-1.0, on=2.0, dtype=bg.float32)
    assert h.dtype == bg.float32 and h.shape == (3, 4) and h.tolist()[2] == [-1.0, 2.0, -1.0, 2.0]


def test_arange_both_forms_and_eye():
    assert bg.arange(4).tolist() == [0, 1, 2, 3]
    assert bg.arange(10, 6, -3, dtype=bg.int64).tolist() == [10, 7]
    assert bg.arange(0.5, 2.0, 0.5, dtype=bg.float64).tolist() == [0.5, 1.0, 1.5]
    assert bg.arange(5, 1).numel() == 0
    assert bg.eye(2, 3, k=1).tolist() == [[0, 1, 0], [0, 0, 1]]
    assert bg.eye_like(bg.zeros(2, 2, dtype=bg.int64)).dtype == bg.int64


def test_integer_paths():
    m = bg.tensor([[1, 2, 3], [4, 5, 6]])
    assert bg.tril(m).tolist() == [[1, 0, 0], [4, 5, 0]]
    assert bg.pad(m, [0, 1, 0, 0], value=9).tolist() == [[9, 1, 2, 3], [9, 4, 5, 6]]
    assert bg.flip(m, 1).tolist() == [[3, 2, 1], [6, 5, 4]]
    v, i = bg.topk(bg.tensor([5, 1, 5, 2]), 2)
    assert v.tolist() == [5, 5] and i.tolist() == [0, 2]


def test_sort_ties_and_nan():
    x = bg.tensor([1.0, 3.0, float("nan"), 3.0, -0.0, 0.0], dtype=bg.float64)
    _, i = bg.sort(x, descending=True)
    assert i.tolist() == [2, 1, 3, 0, 4, 5]
    _, i = bg.sort(x)
    assert i.tolist() == [4, 5, 0, 1, 3, 2]


def test_topk_gradient_goes_to_the_selected():
    x = bg.tensor([0.5, 2.0, -1.0, 3.0], requires_grad=True)
    v, i = bg.topk(x, 2)
    v.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0] and i.tolist() == [3, 1]


def test_errors_name_the_op():
    x = bg.zeros(2, 3)
    with pytest.raises(bg.InputError, match="squeeze"):
        bg.squeeze(x, 0)
    with pytest.raises(bg.InputError, match="pad.*mode"):
        bg.pad(x, [0, 0, 1, 1], mode="circular")
    with pytest.raises(bg.InputError, match="einsum.*diagonal"):
        bg.einsum("ii->i", bg.zeros(3, 3))
    with pytest.raises(bg.InputError, match="scatter.*reduction"):
        bg.scatter(x, 0, bg.zeros(1, 1, dtype=bg.int64), bg.zeros(1, 1), reduction="mul")
    with pytest.raises(bg.InputError, match="split.*sum to"):
        bg.split(x, [1, 1], axis=1)
