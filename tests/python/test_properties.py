"""Properties of the Python API on hostile input, drawn by Hypothesis (Debian's
python3-hypothesis; derandomized, so a run is the same every time): shapes whose element counts
wrap or pass 2^56, dimensions past int64, reshape targets of every kind, floats no int64 holds,
IEEE specials through the elementwise ops, and backward from several threads. Each case either
behaves as NumPy (or torch, for torch's names) does, bitwise where IEEE fixes the result, or raises bitgrad's
error naming what was asked; never a crash, a wrong size or another exception. The examples per
property: BITGRAD_HYPOTHESIS_EXAMPLES (100 in the suite)."""
import os
import threading

import numpy as np
import pytest

import bitgrad as bg

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("BITGRAD_HYPOTHESIS_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
BOUND = 2 ** 56
SMALL_BYTES = 1 << 24  # a shape this test allocates holds at most 16 MiB

dim = st.one_of(st.integers(0, 9), st.integers(2 ** 28, 2 ** 63 - 1), st.integers(2 ** 63, 2 ** 70),
                st.integers(-(2 ** 63), -1))


@SETTINGS
@given(st.lists(dim, max_size=5))
def test_a_shape_is_made_whole_or_refused(dims):
    count = int(np.prod([abs(d) for d in dims], dtype=object)) if dims else 1
    if any(d >= 2 ** 63 for d in dims):
        with pytest.raises(bg.InputError, match=r"zeros: dimension \d+ is \d+, which no int64 holds"):
            bg.zeros(*dims)
    elif any(d < 0 for d in dims):
        with pytest.raises(bg.InputError, match=r"zeros: dimension \d+ is -\d+; dimensions are >= 0"):
            bg.zeros(*dims)
    elif count > BOUND and 0 not in dims:
        with pytest.raises(bg.InputError, match=r"2\^56"):
            bg.zeros(*dims)
    elif count * 4 <= SMALL_BYTES:
        t = bg.zeros(*dims)
        assert t.shape == tuple(dims) and t.numel() == count
        if int(np.prod([d for d in dims if d], dtype=object)) < 2 ** 40:  # NumPy's own bound on a shape
            assert np.array(t).shape == tuple(dims)
        assert bg.zeros(list(dims)).shape == tuple(dims)  # one sequence, as torch takes it


@SETTINGS
@given(st.integers(0, 24), st.lists(st.one_of(st.integers(-2, 9), st.integers(2 ** 30, 2 ** 62), st.just(-1)), max_size=4))
def test_reshape_agrees_with_torch_or_refuses(n, target):
    torch = pytest.importorskip("torch")  # the name is torch's, so is the meaning (NumPy takes -2 as -1)
    assume(int(np.prod([abs(d) for d in target], dtype=object)) < 2 ** 63)  # torch 1.13 asserts internally past int64
    x = bg.arange(n, dtype=bg.float32)
    try:
        want = torch.arange(n, dtype=torch.float32).reshape(target)
    except RuntimeError:
        with pytest.raises(bg.InputError, match="reshape"):
            x.reshape(*target)
        return
    got = x.reshape(*target)
    assert got.shape == want.shape
    if n:  # (0 elements may have a shape NumPy cannot make)
        assert np.array_equal(np.array(got), want)


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@SETTINGS
@given(st.lists(finite_or_not, min_size=1, max_size=8))
def test_a_float_becomes_an_int64_only_when_one_holds_it(values):
    holds = all(np.isfinite(v) and -(2.0 ** 63) <= v < 2.0 ** 63 for v in values)
    if not holds:
        with pytest.raises(bg.InputError, match="has no int64 value"):
            bg.tensor(values, dtype=bg.int64)
        return
    assert np.array(bg.tensor(values, dtype=bg.int64)).tolist() == [int(v) for v in values]  # truncated toward 0


f32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@SETTINGS
@given(st.lists(st.tuples(f32, f32), min_size=1, max_size=16))
def test_ieee_specials_round_as_torch_does(pairs):
    torch = pytest.importorskip("torch")
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    x, y = bg.tensor(a), bg.tensor(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    assert same_bits(np.array(x), a), "a float32 array round-trips its bits"
    for op in (lambda m, p, q: p + q, lambda m, p, q: p - q, lambda m, p, q: p * q, lambda m, p, q: p / q, lambda m, p, q: -p,
               lambda m, p, q: m.abs(p)):
        assert same_bits(np.array(op(bg, x, y)), op(torch, ta, tb).numpy())
    # maximum and minimum: the same but for a tie of zeros, where torch's sign depends on its code
    # path (the first operand for one element, the second for 64 of them: _mm256_max_ps) and
    # bitgrad's follows IEEE 754-2019 (+0 above -0; docs/numerics.md)
    zeros = (a == 0) & (b == 0)
    for name in ("maximum", "minimum"):
        got, want = np.array(getattr(bg, name)(x, y)), getattr(torch, name)(ta, tb).numpy()
        assert same_bits(got[~zeros], want[~zeros])
        assert np.array_equal(np.signbit(got[zeros]), np.full(int(zeros.sum()), name == "minimum") & (np.signbit(a) | np.signbit(b))[zeros]
                              if name == "minimum" else np.signbit(a[zeros]) & np.signbit(b[zeros]))


@SETTINGS
@given(st.integers(1, 6), st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6))
def test_backward_from_threads_sums_each_graph_once(threads, coefficients):
    leaf = bg.zeros(len(coefficients), requires_grad=True)
    c = bg.tensor(np.array(coefficients, np.float32))
    errors = []

    def work():
        try:
            (leaf * c).sum().backward()  # a graph of its own, sharing the leaf
        except Exception as e:  # noqa: BLE001 - any exception is a finding
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    want = np.array(coefficients, np.float32)  # the first gradient is taken as it is (-0 stays -0), as torch does
    for _ in range(threads - 1):
        want = want + np.array(coefficients, np.float32)  # equal addends: the order cannot matter
    assert same_bits(np.array(leaf.grad), want)


@SETTINGS
@given(st.integers(-(2 ** 40), 2 ** 40))
def test_a_thread_count_is_one_to_1024_or_refused(n):
    old = bg.get_num_threads()
    try:
        if 1 <= n <= 1024:
            assume(n <= 64)  # starting a thousand threads is not this test's business
            bg.set_num_threads(n)
            assert bg.get_num_threads() == n
        else:
            with pytest.raises(bg.InputError, match="set_num_threads: expected 1 to 1024 threads"):
                bg.set_num_threads(n)
    finally:
        bg.set_num_threads(old)
