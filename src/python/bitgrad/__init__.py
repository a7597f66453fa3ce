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
# gradient accumulation on the canonical tree; data parallel from Python
from ._accumulate import accumulate, Accumulator  # noqa: F401,E402
del distributed  # noqa: F821  (the extension's submodule; the Python module below)
from . import distributed  # noqa: F401,E402
del onnx  # noqa: F821
from . import onnx  # noqa: F401,E402
from . import autograd  # noqa: F401,E402  (PyTorch's autograd.Function)

__version__ = _bitgrad.__version__
numerics_version = _bitgrad.numerics_version

_NUMPY_OF = {float32: _np.float32, float64: _np.float64, int64: _np.int64, uint8: _np.uint8, float16: _np.float16}


def _as_integers(a, target):
    """a as the integer type `target`; a float that no integer of it holds (NaN, an infinity, an
    int64 at or past 2^63) raises instead of becoming whatever the conversion gives."""
    if a.dtype.kind == "f" and _np.dtype(target).kind in "iu":
        bad = ~_np.isfinite(a)
        if target == _np.int64:
            with _np.errstate(invalid="ignore"):
                bad |= (a < -2.0 ** 63) | (a >= 2.0 ** 63)
        if bad.any():
            raise InputError("bitgrad.tensor: %r has no %s value (NaN, an infinity or out of range)" % (a[bad].flat[0].item(), _np.dtype(target).name))
    return a.astype(target, order="C")


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
            t = from_numpy(_as_integers(a, _NUMPY_OF[dtype]))
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


# ---- randomness without traps, recomputation of Python forwards, PyTorch's habits ----
_checkpoint = _bitgrad.checkpoint


def checkpoint(fn, x, params=[]):  # noqa: B006 (never mutated)
    """fn(x) without keeping its intermediates: the backward runs fn again (contract T9).

    Every tensor inside fn that requires grad must be x or in params (a module: its parameters).
    The recomputation sees what the first run saw: the same nn.Context of the forward in progress
    and the same state of the generator (so dropout without a key draws the same masks).
    """
    if hasattr(params, "parameters") and not isinstance(params, (list, tuple)):
        params = params.parameters()
    contexts = _bitgrad.nn._contexts()
    state = get_rng_state()
    first = [True]

    def run(y):
        if first[0]:
            first[0] = False
            return fn(y)
        now_contexts, now_state = _bitgrad.nn._contexts(), get_rng_state()
        _bitgrad.nn._set_contexts(contexts)
        set_rng_state(state)
        try:
            return fn(y)
        finally:
            _bitgrad.nn._set_contexts(now_contexts)
            set_rng_state(now_state)

    return _checkpoint(run, x, list(params))


from . import _pytorch_habits  # noqa: E402

_pytorch_habits.install(globals(), Tensor)
checkpoint.__module__ = __name__
from ._pytorch_habits import where, zeros_like, ones_like, full_like, empty_like  # noqa: E402,F401
