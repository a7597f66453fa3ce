"""bitgrad from Python: tensors, ops, backward, gradients, zero-copy NumPy and DLPack, a fingerprint.

    make build
    PYTHONPATH=build/python /usr/bin/python3 examples/python/quickstart.py

(docs/python.md walks through the same ground.)
"""
import numpy as np

import bitgrad as bg

# ---- tensors and ops ------------------------------------------------------------------------
x = bg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)  # a copy; float32
w = bg.full([3], 0.5, requires_grad=True)
print("x", x)
print("w", w)

y = (x * w).sum(axis=1).tanh()       # broadcasting [2, 3] * [3], a reduction, an elementwise op
loss = (y ** 2).mean() + 0.1 * w.norm()
print("y", y, "produced by", y.grad_fn)
print("loss", loss.item())

# ---- backward -------------------------------------------------------------------------------
loss.backward()                      # accumulates into the leaves' .grad
print("dloss/dx", x.grad)
print("dloss/dw", w.grad)

# bitgrad.grad: gradients of an output with respect to chosen inputs, leaving .grad alone
gx, gw = bg.grad(((x * w).sum(axis=1).tanh() ** 2).mean(), [x, w])
print("bg.grad matches (without the norm term):", gx.tolist() == x.grad.tolist())

# the finite-difference check bitgrad's own tests use (in float64)
r = bg.gradcheck(lambda ts: (ts[0] * ts[1]).sum(axis=1).tanh().mean(),
                 [bg.tensor(np.random.default_rng(0).normal(size=(2, 3)), requires_grad=True),
                  bg.tensor([0.5, -0.25, 1.0], dtype=bg.float64, requires_grad=True)])
print("gradcheck", r)

with bg.no_grad():                   # nothing recorded
    z = x * 2
print("under no_grad: requires_grad", z.requires_grad)

# ---- NumPy without copies -------------------------------------------------------------------
a = np.arange(6, dtype=np.float32).reshape(2, 3)
t = bg.from_numpy(a)                 # shares a's memory
print("from_numpy shares memory:", t.data_ptr == a.ctypes.data)
back = t.numpy()                     # shares it again
print(".numpy() shares memory:  ", back.ctypes.data == t.data_ptr)
a[0, 0] = 42.0                       # visible through the tensor
print("after a[0, 0] = 42:", t[0])
try:
    x.numpy()                        # writes through the array would bypass autograd
except bg.AutogradError as e:
    print("refused:", e)
try:
    bg.from_numpy(a[:, ::-1])        # negative strides cannot be a view
except bg.InputError as e:
    print("refused:", e)

# ---- PyTorch through DLPack -----------------------------------------------------------------
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    tt = torch.from_dlpack(t)        # bitgrad -> torch, no copy
    print("torch sees the same memory:", tt.data_ptr() == t.data_ptr, tt.tolist())
    u = torch.linspace(0, 1, 5, dtype=torch.float64)
    b = bg.from_dlpack(u)            # torch -> bitgrad, no copy
    print("bitgrad sees the same memory:", b.data_ptr == u.data_ptr(), b)

# ---- a fingerprint --------------------------------------------------------------------------
# XXH3-128 of dtypes, shapes and bytes: the same on every machine, thread count and code path
print("threads", bg.get_num_threads(), "code path", bg.get_isa())
print("fingerprint of the gradients", bg.fingerprint([x.grad, w.grad]))
