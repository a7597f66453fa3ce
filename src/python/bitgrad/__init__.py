"""bitgrad: reverse-mode autodiff and neural-network training whose results are bitwise
reproducible by construction: the same bits across runs, thread counts, loader workers, batch
composition, micro-batches, MPI ranks, resume and builds.

The tensors, autograd, layers, optimizers, loaders, sessions and instruments are bitgrad's C++
(``bitgrad._bitgrad``); this package adds a few conveniences in Python. See docs/python.md.
"""
import numpy as _np

from . import _bitgrad
from ._bitgrad import *  # noqa: F401,F403  (Tensor, dtypes, ops, factories, training)
from ._bitgrad import Tensor, dtype, float32, float64, int64, uint8, bfloat16, float16  # noqa: F401
# the Python modules bitgrad.nn, ... (not the extension's submodules of those names)
del nn, optim, data, io, instruments  # noqa: F821
from . import nn, optim, data, io, instruments  # noqa: F401,E402
# issue 30: gradient accumulation on the canonical tree; data parallel from Python
from ._accumulate import accumulate, Accumulator  # noqa: F401,E402
del distributed  # noqa: F821  (the extension's submodule; the Python module below)
from . import distributed  # noqa: F401,E402
del onnx  # noqa: F821  (issue 31)
from . import onnx  # noqa: F401,E402

__version__ = _bitgrad.__version__
numerics_version = _bitgrad.numerics_version

_NUMPY_OF = {float32: _np.float32, float64: _np.float64, int64: _np.int64, uint8: _np.uint8, float16: _np.float16}


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (a number, nested lists, a NumPy array or a tensor).

    Without dtype: floats become float32 (a NumPy array keeps float64), integers int64, bools
    uint8. Always copies; bitgrad.from_numpy shares an array's memory instead.
    """
    if isinstance(data, Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
    else:
        is_array = isinstance(data, _np.ndarray)
        try:
            a = _np.array(data, copy=True)
        except ValueError as e:
            raise InputError("bitgrad.tensor: the data is not a rectangular array of numbers (%s)" % e) from None
        if a.dtype == object:
            raise TypeError("bitgrad.tensor: the data is not an array of numbers")
        if dtype is None:
            if a.dtype.kind == "b":
                target = _np.uint8
            elif a.dtype.kind in "iu" and a.dtype != _np.uint8:
                target = _np.int64
            elif a.dtype.kind == "f" and (is_array or a.dtype == _np.float16):
                target = a.dtype.type if a.dtype in (_np.float16, _np.float32, _np.float64) else _np.float64
            elif a.dtype.kind == "f":
                target = _np.float32
            elif a.dtype == _np.uint8:
                target = _np.uint8
            else:
                raise TypeError("bitgrad.tensor: dtype %s has no bitgrad dtype" % a.dtype)
            t = from_numpy(a.astype(target, order="C"))
        elif dtype == bfloat16:
            t = from_numpy(a.astype(_np.float32, order="C")).to(bfloat16)
        else:
            if dtype not in _NUMPY_OF:
                raise TypeError("bitgrad.tensor: dtype must be a bitgrad.dtype, got %r" % (dtype,))
            t = from_numpy(a.astype(_NUMPY_OF[dtype], order="C"))
    if requires_grad:
        t.requires_grad = True
    return t


dtype.__repr__ = dtype.__str__ = lambda self: "bitgrad." + self.name


def _no_grad_call(self, fn):
    """@bitgrad.no_grad() as a decorator."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with no_grad():
            return fn(*args, **kwargs)

    return wrapper


no_grad.__call__ = _no_grad_call
