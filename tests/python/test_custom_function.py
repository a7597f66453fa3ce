"""bitgrad.autograd.Function, PyTorch's way of adding an op: forward and backward by hand, checked
against finite differences in float64, the same bits as bitgrad's own op where it computes the
same sums, the same bits at 1 and 2 threads and under micro-batches; a backward whose parameter
gradient is not one sum over the samples is reported under micro-batches (numerics.md §10,
"Uses"), and misuse raises naming the function."""
import numpy as np
import pytest

import bitgrad as bg
from bitgrad import nn

from shared_models import LinearFn


class HalvedWeightGrad(LinearFn):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, (g.T @ x) * 0.5, bg.sum(g, 0)  # an op after the sum over the samples


class Net(nn.Module):
    def __init__(self, fn=LinearFn):
        super().__init__()
        self.fn = fn
        self.w1 = nn.Parameter(bg.randn(16, 6) * 0.3)
        self.b1 = nn.Parameter(bg.zeros(16))
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(bg.tanh(self.fn.apply(x, self.w1, self.b1)))


def data(n=128, seed=2):
    r = np.random.RandomState(seed)
    return bg.tensor(r.randn(n, 6).astype(np.float32)), bg.tensor(r.randint(0, 4, size=n).astype(np.int64))


def grads(m):
    return [bg.fingerprint(p.grad) for p in m.parameters()]


def test_gradients_match_finite_differences_in_float64():
    r = np.random.RandomState(0)
    x, w, b = (bg.tensor(r.randn(*s), dtype=bg.float64, requires_grad=True) for s in [(5, 3), (4, 3), (4,)])
    res = bg.gradcheck(lambda t: LinearFn.apply(t[0], t[1], t[2]), [x, w, b])
    assert res["ok"], res


def test_the_same_bits_as_the_built_in_op():
    x, _ = data()
    x.requires_grad = True
    w = nn.Parameter(bg.randn(16, 6))
    b = nn.Parameter(bg.randn(16))
    g = bg.tensor(np.random.RandomState(3).randn(128, 16).astype(np.float32))
    y = LinearFn.apply(x, w, b)
    y.backward(g)
    mine = [bg.fingerprint(y)] + [bg.fingerprint(t.grad) for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    y = bg.linear(x, w, b)
    y.backward(g)
    assert mine == [bg.fingerprint(y)] + [bg.fingerprint(t.grad) for t in (x, w, b)]


def test_threads_and_micro_batches_give_the_same_bits():
    x, y = data()
    prints = []
    for threads in (1, 2):
        bg.set_num_threads(threads)
        bg.manual_seed(1)
        m = Net()
        opt = bg.optim.SGD(m, lr=0.1, momentum=0.9)
        for _ in range(5):
            opt.zero_grad()
            bg.cross_entropy(m(x), y).backward()
            opt.step()
        prints.append(bg.fingerprint(m))
    assert prints[0] == prints[1]
    bg.manual_seed(1)
    m = Net()
    bg.cross_entropy(m(x), y).backward()
    want = grads(m)
    for k in (2, 4):
        m.zero_grad()
        bg.accumulate(m, [(x[i * 128 // k:(i + 1) * 128 // k], y[i * 128 // k:(i + 1) * 128 // k]) for i in range(k)],
                      lambda a, b, r: bg.cross_entropy(m(a), b, reduction="sum"), strict=True)
        assert grads(m) == want, k


def test_a_gradient_after_the_sum_is_reported_under_micro_batches():
    x, y = data()
    bg.manual_seed(1)
    m = Net(HalvedWeightGrad)
    acc = bg.Accumulator(m, 128)
    for i in (0, 64):
        acc.backward(bg.cross_entropy(m(x[i:i + 64]), y[i:i + 64], reduction="sum"), 64)
    acc.finish()
    assert acc.whole_batch is False
    m.zero_grad()
    with pytest.raises(bg.InputError, match=r"parameter 'w1' \[16, 6\] received a gradient from 'function' in HalvedWeightGrad"):
        bg.accumulate(m, [(x[:64], y[:64]), (x[64:], y[64:])], lambda a, b, r: bg.cross_entropy(m(a), b, reduction="sum"),
                      strict=True)


def test_misuse_raises_naming_the_function():
    w = nn.Parameter(bg.ones(3))

    class TooFew(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match=r"TooFew.backward returned 1 value\(s\); forward took 2"):
        TooFew.apply(w, w).sum().backward()

    class WrongShape(TooFew):
        @staticmethod
        def backward(ctx, g):
            return bg.ones(2), None

    w.grad = None
    with pytest.raises(bg.InputError, match=r"WrongShape: backward's gradient 0 is f32 \[2\]; input 0 is f32 \[3\]"):
        WrongShape.apply(w, bg.ones(3)).sum().backward()

    class Pair(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a, a

    with pytest.raises(TypeError, match="returns one bitgrad.Tensor"):
        Pair.apply(w)
    with pytest.raises(TypeError, match=r"call TooFew.apply"):
        TooFew(w, w)
    with bg.no_grad():  # nothing recorded: the forward's value alone
        assert TooFew.apply(w, w).requires_grad is False
