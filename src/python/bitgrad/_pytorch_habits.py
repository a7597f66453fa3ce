"""PyTorch's habits where they cost nothing to the contract.

* `dim=` as an alias of `axis=` (functions and Tensor methods that take an axis);
* a wrong keyword or argument type names what the function accepts, instead of pybind11's
  overload dump;
* numbers as the second and third arguments of `where`;
* `Tensor.T` on N-d (the axes reversed, as NumPy) and `Tensor.mT` (the last two swapped);
* `zeros_like`, `ones_like`, `full_like`, `empty_like`.

Each wrapper passes the call through unchanged when it already fits: the bits are the op's.
"""
import functools
import re

from . import _bitgrad as _b

_SIG = re.compile(r"^(?:\d+\. )?(\w+)\((.*)\) -> ")


def _signatures(fn, name):
    out = []
    for line in (getattr(fn, "__doc__", None) or "").splitlines():
        m = _SIG.match(line.strip())
        if m and m.group(1) == name:
            out.append(m.group(2))
    return out


def _accepted(fn, name):
    """'name(x, axis=None, keepdim=False)' for each overload, from pybind11's signature lines."""
    sigs = []
    for s in _signatures(fn, name):
        parts = []
        depth, cur = 0, ""
        for ch in s:
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == "," and depth == 0:
                parts.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            parts.append(cur.strip())
        names = []
        for p in parts:
            head, _, default = p.partition("=")
            pname, _, ptype = head.partition(":")
            pname, ptype = pname.strip(), ptype.strip().replace("bitgrad._bitgrad.", "bitgrad.")
            if pname == "self":
                continue
            names.append("%s: %s%s" % (pname, ptype, (" = " + default.strip()) if default else "") if ptype else pname)
        sigs.append("%s(%s)" % (name, ", ".join(names)))
    return sigs


def _explain(name, fn, args, kwargs, sig_name=None):
    got = [type(a).__name__ for a in args] + ["%s=%s" % (k, type(v).__name__) for k, v in kwargs.items()]
    accepted = [a.replace(sig_name + "(", name + "(", 1) for a in _accepted(fn, sig_name)] if sig_name else _accepted(fn, name)
    known = set()
    for s in accepted:
        known.update(re.findall(r"(\w+):", s))
    unknown = [k for k in kwargs if known and k not in known and k != "dim"]
    msg = "%s: " % name
    if unknown:
        msg += "no keyword %s; " % ", ".join(repr(k) for k in unknown)
    msg += "called with (%s); accepted: %s" % (", ".join(got), " or ".join(accepted) if accepted else "see help(bitgrad.%s)" % name)
    return msg


def _wrap(fn, name, has_axis, sig_name=None, skip_self=False, method=False):
    def wrapper(*args, **kwargs):
        if has_axis and "dim" in kwargs:
            if "axis" in kwargs:
                raise TypeError("%s: give axis= or its alias dim=, not both" % name)
            kwargs["axis"] = kwargs.pop("dim")
        try:
            r = fn(*args, **kwargs)
            if skip_self:  # a constructor: a Python subclass's instance is now made (nn.py checks it)
                d = getattr(args[0], "__dict__", None)
                if d is not None:
                    d["_bg_init"] = True
            return r
        except TypeError as e:
            if "incompatible function arguments" not in str(e) and "incompatible constructor arguments" not in str(e):
                raise
            shown = args[1:] if skip_self or method else args
            owner = type(args[0]).__name__ if method and args else ""
            raise TypeError(_explain(owner + "." + name if method else name, fn, shown, kwargs, sig_name or (name if method else None))) from None

    functools.update_wrapper(wrapper, fn)
    return wrapper


def install_nn(namespace):
    """The same for bitgrad.nn: its factory functions and the constructors of its C++ classes."""
    for name, obj in list(namespace.items()):
        if name.startswith("_"):
            continue
        if type(obj).__name__ == "builtin_function_or_method":
            namespace[name] = _wrap(obj, name, False)
        elif isinstance(obj, type) and "__init__" in vars(obj) and type(vars(obj)["__init__"]).__name__ == "instancemethod":
            obj.__init__ = _wrap(vars(obj)["__init__"], name, False, "__init__", True)
    module = namespace["Module"]  # its C++ methods (load_state_dict, init, ...)
    for name, fn in list(vars(module).items()):
        if not name.startswith("_") and type(fn).__name__ == "instancemethod":
            setattr(module, name, _wrap(fn, name, False, method=True))


def _takes_axis(fn, name):
    return any(re.search(r"\baxis\b", s) for s in _signatures(fn, name))


def install(namespace, tensor_cls):
    """Wraps the functions of `namespace` (a dict: the bitgrad package's) and the Tensor methods."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not callable(fn) or isinstance(fn, type) or type(fn).__name__ != "builtin_function_or_method":
            continue
        namespace[name] = _wrap(fn, name, _takes_axis(fn, name))
    for name in list(vars(tensor_cls)):
        if name.startswith("_"):
            continue
        fn = getattr(tensor_cls, name)
        if type(fn).__name__ != "instancemethod":
            continue
        setattr(tensor_cls, name, _wrap(fn, name, _takes_axis(fn, name), method=True))
    tensor_cls.T = property(lambda t: t.permute(*range(t.ndim - 1, -1, -1)) if t.ndim >= 2 else t,
                            doc="The axes reversed (NumPy's .T): the transpose of a matrix, a vector itself.")
    tensor_cls.mT = property(lambda t: _mT(t), doc="The last two axes swapped (a batch of matrices transposed).")


def _mT(t):
    if t.ndim < 2:
        raise _b.InputError("mT: needs at least 2 dimensions, got %d" % t.ndim)
    return t.transpose(-2, -1)


def _number_like(v, like):
    if isinstance(v, _b.Tensor):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("where: a and b are bitgrad.Tensors or numbers, got %s" % type(v).__name__)
    return _b.full([], float(v), dtype=like.dtype if like is not None and like.dtype in (_b.float32, _b.float64) else _b.float32)


def where(cond, a, b):
    """a where cond is nonzero, else b (broadcasting); a or b may be a number (of the other's dtype)."""
    ta = a if isinstance(a, _b.Tensor) else None
    tb = b if isinstance(b, _b.Tensor) else None
    return _b.where(cond, _number_like(a, tb), _number_like(b, ta))


def zeros_like(x, *, dtype=None, requires_grad=False):
    """Zeros of x's shape (and dtype)."""
    return _b.zeros(list(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


def ones_like(x, *, dtype=None, requires_grad=False):
    """Ones of x's shape (and dtype)."""
    return _b.ones(list(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)


def full_like(x, value, *, dtype=None, requires_grad=False):
    """`value` in x's shape (and dtype)."""
    return _b.full(list(x.shape), value, dtype=dtype or x.dtype, requires_grad=requires_grad)


def empty_like(x, *, dtype=None):
    """An uninitialised tensor of x's shape (and dtype)."""
    return _b.empty(list(x.shape), dtype=dtype or x.dtype)
