"""bitgrad.Tensor from Python: factories, autograd, operators, indexing, and the zero-copy
interchange with NumPy (buffer protocol, from_numpy, .numpy()) and PyTorch (DLPack)."""
import gc
import sys

import numpy as np
import pytest

import bitgrad as bg
import parity_bounds as pb


def test_tensor_copies_and_infers_dtypes():
    assert bg.tensor([1.5, 2]).dtype == bg.float32
    assert bg.tensor([1, 2]).dtype == bg.int64
    assert bg.tensor([True, False]).dtype == bg.uint8
    assert bg.tensor(np.zeros(3)).dtype == bg.float64  # an array keeps float64
    assert bg.tensor([1, 2], dtype=bg.float64).dtype == bg.float64
    a = np.arange(4, dtype=np.float32)
    t = bg.tensor(a)
    assert t.data_ptr != a.ctypes.data  # tensor() always copies
    a[0] = 7
    assert t.tolist() == [0, 1, 2, 3]
    b = bg.tensor([1.0, 1.00390625, 3.0], dtype=bg.bfloat16)
    assert b.dtype == bg.bfloat16 and b.to(bg.float32).tolist() == [1.0, 1.0, 3.0]  # rounded to nearest even


def test_factories_and_metadata():
    z = bg.zeros(2, 3)
    assert z.shape == (2, 3) and z.ndim == 2 and z.numel() == 6 and len(z) == 2 and z.size(1) == 3
    assert bg.ones((4,), dtype=bg.float64).dtype == bg.float64
    assert bg.full([2, 2], 1.5).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert bg.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert bg.scalar(2.5).item() == 2.5
    assert bg.zeros(2, 2, requires_grad=True).requires_grad
    assert repr(bg.float32) == "bitgrad.float32"
    assert "shape=[2, 3]" in str(z)


def test_autograd_matches_hand_derivatives():
    x = bg.tensor([[1.0, -2.0], [3.0, 0.5]], dtype=bg.float64, requires_grad=True)
    w = bg.tensor([[0.5], [-1.0]], dtype=bg.float64, requires_grad=True)
    y = ((x @ w).tanh() * 3 - 1).sum()
    assert y.grad_fn == "sum" and x.is_leaf and x.grad is None
    y.backward()
    xn, wn = x.detach().numpy(), w.detach().numpy()
    xw = xn @ wn  # 2.5 and 1.0: exact on both sides
    t = np.tanh(xw)
    g = 3 * (1 - t ** 2)
    # the two tanh within 0.501 ulp (bitgrad, numerics §8) + 4 ulp (numpy: glibc or its SIMD kernels,
    # which numpy's own accuracy tests hold to 4 ulp) <= 4.501 * 2^-52 |t|; g = 3 (1 - t t) moves by
    # 6 |t| times that, plus 3 roundings of each side on magnitudes <= 3 (1 + t^2); then x^T g sums 2
    # products (gamma(2) of their magnitudes per side), g w^T is one product (u per side)
    dg = 6 * np.abs(t) * 4.501 * 2.0 ** -52 * np.abs(t) + 2 * pb.gamma(3, pb.U64) * 3 * (1 + t ** 2)
    assert np.all(np.abs(w.grad.numpy() - xn.T @ g) <= np.abs(xn.T) @ dg + 2 * pb.gamma(2, pb.U64) * np.abs(xn.T) @ np.abs(g))
    assert np.all(np.abs(x.grad.numpy() - g @ wn.T) <= dg @ np.abs(wn.T) + 2 * pb.U64 * np.abs(g) @ np.abs(wn.T))
    # gradients accumulate, and assigning None drops them
    y2 = (x * 2).sum()
    before = x.grad.numpy().copy()
    y2.backward()
    np.testing.assert_array_equal(x.grad.numpy(), before + 2)
    x.grad = None
    assert x.grad is None


def test_operators_with_numbers_and_broadcasting():
    a = bg.tensor([[1.0, 2.0, 3.0]])
    b = bg.tensor([[10.0], [20.0]])
    assert (a + b).shape == (2, 3)
    assert (2 - a).tolist() == [[1, 0, -1]]
    assert (6 / a).tolist() == [[6, 3, 2]]
    assert (a ** 2).tolist() == [[1, 4, 9]]
    assert (2 ** a).tolist() == [[2, 4, 8]]
    assert bg.tensor(2.5).shape == () and bg.tensor(np.array(3)).shape == ()
    assert (-a).tolist() == [[-1, -2, -3]]
    assert (a * 0.5 + 1).tolist() == [[1.5, 2, 2.5]]
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError):
        a + None


def test_indexing_is_differentiable():
    x = bg.tensor(np.arange(24, dtype=np.float64).reshape(2, 3, 4), requires_grad=True)
    assert x[1].shape == (3, 4)
    assert x[1, 2].tolist() == [20, 21, 22, 23]
    assert x[:, 1:3, ::2].shape == (2, 2, 2)
    assert x[..., -1].tolist() == [[3, 7, 11], [15, 19, 23]]
    assert x[None, 0].shape == (1, 3, 4)
    assert x[:, [2, 0]].shape == (2, 2, 4)
    assert x[-1, -1, -1].item() == 23
    y = x[1, 1:, ::3].sum() + x[:, [0, 0]].sum()
    y.backward()
    g = np.zeros((2, 3, 4))
    g[1, 1:, ::3] += 1
    g[:, 0] += 2
    np.testing.assert_array_equal(x.grad.numpy(), g)
    with pytest.raises(bg.InputError, match="negative step"):
        x[::-1]
    with pytest.raises(IndexError, match="out of range"):
        x[2]
    # several advanced indices (NumPy broadcasts them together) are refused, not answered otherwise
    with pytest.raises(bg.InputError, match="one list or tensor index"):
        x[0, :, [1, 2]]
    with pytest.raises(bg.InputError, match="one list or tensor index"):
        x[[0, 1], [1, 2]]
    assert [r.tolist() for r in bg.arange(3)] == [0, 1, 2]
    assert [tuple(r.shape) for r in x] == [(3, 4), (3, 4)]
    with pytest.raises(bg.InputError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError, match="item assignment"):
        x[0] = 1


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = bg.from_numpy(a)
    assert t.data_ptr == a.ctypes.data
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    n = t.numpy()
    assert n.ctypes.data == a.ctypes.data
    # a strided view of an array is still shared, with its strides
    v = a[:, 1::2]
    tv = bg.from_numpy(v)
    assert tv.data_ptr == v.ctypes.data and tv.strides == (4, 2)
    assert tv.tolist() == v.tolist()
    # the buffer protocol: numpy.asarray and memoryview see the same memory
    assert np.asarray(t).ctypes.data == a.ctypes.data
    assert memoryview(t).shape == (3, 4)
    # the tensor keeps the array alive, and the array the tensor
    b = np.ones(5, dtype=np.float64)
    tb = bg.from_numpy(b)
    refs = sys.getrefcount(b)
    del tb
    gc.collect()
    assert sys.getrefcount(b) == refs - 1
    u = bg.ones(3)
    arr = u.numpy()
    del u
    gc.collect()
    assert arr.tolist() == [1, 1, 1]


@pytest.mark.parametrize("dtype,bg_dtype", [(np.float32, bg.float32), (np.float64, bg.float64), (np.int64, bg.int64),
                                            (np.uint8, bg.uint8), (np.bool_, bg.uint8), (np.float16, bg.float16)])
def test_from_numpy_dtypes(dtype, bg_dtype):
    a = np.ones((2, 3), dtype=dtype)
    t = bg.from_numpy(a)
    assert t.dtype == bg_dtype and t.data_ptr == a.ctypes.data


def test_from_numpy_refuses_with_the_reason():
    with pytest.raises(bg.InputError, match="dtype int32"):
        bg.from_numpy(np.ones(3, dtype=np.int32))
    ro = np.ones(3, dtype=np.float32)
    ro.setflags(write=False)
    with pytest.raises(bg.InputError, match="read-only"):
        bg.from_numpy(ro)
    with pytest.raises(bg.InputError, match="stride -4"):
        bg.from_numpy(np.arange(4, dtype=np.float32)[::-1])
    with pytest.raises(bg.InputError, match="big-endian"):
        bg.from_numpy(np.ones(3, dtype=">f4"))
    buf = np.zeros(17, dtype=np.uint8)
    mis = buf[1:].view(np.float32)
    with pytest.raises(bg.InputError, match="not aligned"):
        bg.from_numpy(mis)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        bg.from_numpy([1.0, 2.0])
    with pytest.raises(TypeError):
        bg.from_numpy(None)
    # the copies work where sharing cannot
    assert bg.tensor(np.arange(4, dtype=np.float32)[::-1]).tolist() == [3, 2, 1, 0]
    assert bg.tensor(ro).tolist() == [1, 1, 1]


def test_numpy_refuses_what_it_cannot_share():
    t = bg.ones(2, requires_grad=True)
    with pytest.raises(bg.AutogradError, match="detach"):
        t.numpy()
    assert t.detach().numpy().tolist() == [1, 1]
    with pytest.raises(bg.InputError, match="bfloat16"):
        bg.ones(2).to(bg.bfloat16).numpy()
    # the buffer protocol refuses the same (an exception, not the end of the process)
    with pytest.raises(bg.AutogradError):
        memoryview(t)
    with pytest.raises(bg.AutogradError):
        np.asarray(t)
    with pytest.raises(bg.InputError, match="bfloat16"):
        memoryview(bg.ones(2).to(bg.bfloat16))
    with pytest.raises(bg.InputError, match="bfloat16"):
        np.asarray(bg.ones(2).to(bg.bfloat16))
    strided = bg.ones(4, 6)[:, ::2]
    assert memoryview(strided).strides == (24, 8) and np.asarray(strided).ctypes.data == strided.data_ptr


def test_dlpack_with_torch_shares_memory():
    torch = pytest.importorskip("torch")
    t = bg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.data_ptr and tt.tolist() == t.tolist()
    tt[0, 0] = 9
    assert t[0, 0].item() == 9
    src = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # a transposed view
    b = bg.from_dlpack(src)
    assert b.data_ptr == src.data_ptr() and b.shape == (4, 3) and b.strides == (1, 4)
    assert b.tolist() == src.tolist()
    h = bg.from_dlpack(torch.ones(3, dtype=torch.bfloat16))
    assert h.dtype == bg.bfloat16 and h.to(bg.float32).tolist() == [1, 1, 1]
    # the producer's tensor lives as long as bitgrad's view of it
    s = torch.full((1000,), 3.0)
    v = bg.from_dlpack(s)
    del s
    gc.collect()
    assert v.sum().item() == 3000
    with pytest.raises(bg.AutogradError):
        torch.from_dlpack(bg.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="__dlpack__"):
        bg.from_dlpack(3)


def test_dlpack_with_numpy():
    a = np.arange(5, dtype=np.int64)
    t = bg.from_dlpack(a)
    assert t.dtype == bg.int64 and t.data_ptr == a.ctypes.data
    back = np.from_dlpack(t)
    assert back.ctypes.data == a.ctypes.data


def test_no_grad_context_and_decorator():
    x = bg.ones(2, requires_grad=True)
    with bg.no_grad():
        assert not bg.is_grad_enabled()
        assert not (x * 2).requires_grad
        with bg.no_grad():
            pass
        assert not bg.is_grad_enabled()
    assert bg.is_grad_enabled()

    @bg.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_backward_misuse_is_a_runtime_error():
    x = bg.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already freed"):
        y.backward()
    with pytest.raises(bg.AutogradError, match="does not require grad"):
        bg.ones(2).sum().backward()
    with pytest.raises(bg.AutogradError, match="seed"):
        (x * 2).backward()
    z = x * 2
    with pytest.raises(bg.AutogradError, match="leaf"):
        z.requires_grad = False


def test_grad_function_and_gradcheck():
    x = bg.tensor([0.3, -0.7, 1.1], dtype=bg.float64, requires_grad=True)
    (g,) = bg.grad((x.exp() * x).sum(), [x])
    v = np.array([0.3, -0.7, 1.1])
    # bitgrad: e x + e (a product and a sum: numerics §8's gradients); numpy: e (1 + x). The two exp
    # within 0.749 + 4 ulp (bitgrad's, numerics §8; numpy's as above) <= 4.749 * 2^-52 e; each side
    # rounds twice on magnitudes <= (1 + |x|) e: gamma(2) of that per side
    e = np.exp(v)
    bound = 4.749 * 2.0 ** -52 * e * np.abs(1 + v) + 2 * pb.gamma(2, pb.U64) * (1 + np.abs(v)) * e
    assert np.all(np.abs(g.numpy() - e * (1 + v)) <= bound)
    assert x.grad is None
    r = bg.gradcheck(lambda xs: (xs[0].sigmoid() * xs[0]).sum(), [x])
    assert r["ok"] and r["checked"] == 3


def test_fingerprint_is_the_clis_hash_of_dtype_shape_and_bytes():
    a = bg.tensor([1.0, 2.0])
    assert bg.fingerprint(a) == bg.fingerprint([a])
    assert bg.fingerprint(a) != bg.fingerprint(a.reshape(2, 1))
    assert bg.fingerprint(a) != bg.fingerprint(a.to(bg.float64))
    assert len(bg.fingerprint(a)) == 32
    assert bg.fingerprint({"w": a}) == bg.fingerprint([("w", a)])
