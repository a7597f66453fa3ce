"""PyTorch's habits where they cost nothing to the contract.

* `dim=` as an alias of `axis=` (functions and Tensor methods that take an axis);
* a wrong keyword or argument type names what the function accepts (the signatures its stub
  declares), instead of pybind11's overload dump;
* numbers as the second and third arguments of `where`;
* `Tensor.T` on N-d (the axes reversed, as NumPy) and `Tensor.mT` (the last two swapped);
* `zeros_like`, `ones_like`, `full_like`, `empty_like`.

Each wrapper passes the call through unchanged when it already fits: the bits are the op's.
"""
import ast
import functools
import os
import re

from . import _bitgrad as _b


class _Declared:
    """The signatures a stub declares (src/python/bitgrad/*.pyi, which Python.test_stubs holds to
    the module): 'sum(x: Tensor, axis: ... = None, keepdim: bool = False)' for each overload of
    each function, method ('Tensor.sum') and constructor ('Linear'), the stub's private type
    aliases written out."""

    def __init__(self, stub):
        self.sigs, self.names = {}, {}
        path = os.path.join(os.path.dirname(__file__), stub)
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except OSError:  # an install without its stubs: the errors say less, the calls are the same
            return
        aliases = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id.startswith("_") and not isinstance(node.value, ast.Call):
                aliases[node.targets[0].id] = ast.unparse(node.value)
        self._aliases = aliases
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self._add(node.name, node.name, node)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in self.sigs:
                for t in node.targets:  # `conv1d = conv2d`: the same parameters under its own name
                    if isinstance(t, ast.Name):
                        self.sigs[t.id] = [t.id + sig[len(node.value.id):] for sig in self.sigs[node.value.id]]
                        self.names[t.id] = self.names[node.value.id]
            elif isinstance(node, ast.ClassDef):
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        shown = node.name if m.name == "__init__" else node.name + "." + m.name
                        self._add(node.name + "." + m.name, shown, m)

    def _add(self, key, shown, fn):
        if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
            return
        args = fn.args
        if (args.posonlyargs + args.args) and (args.posonlyargs + args.args)[0].arg in ("self", "cls"):
            args = ast.arguments(posonlyargs=args.posonlyargs[1:] if args.posonlyargs else [],
                                 args=args.args[1:] if not args.posonlyargs else args.args, vararg=args.vararg,
                                 kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                                 defaults=args.defaults)
        text = _format_args(args)
        for name, value in self._aliases.items():
            text = re.sub(r"\b%s\b" % re.escape(name), value, text)
        self.sigs.setdefault(key, []).append("%s(%s)" % (shown, text))
        self.names.setdefault(key, set()).update(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs)
        for a in (args.vararg, args.kwarg):
            if a is not None:
                self.names[key].add(a.arg)

    def of(self, key):
        """(the signatures, the parameter names) declared for key; none where the stub lacks it."""
        return self.sigs.get(key, []), self.names.get(key, set())


def _format_args(args):
    """A stub function's parameters as its signature line writes them: 'x: Tensor, axis: int = None, *, seed: ...'."""
    def one(a, default=None, star=""):
        t = star + a.arg + (": " + ast.unparse(a.annotation) if a.annotation is not None else "")
        return t + (" = " + ast.unparse(default) if default is not None else "")
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    out = [one(a, d) for a, d in zip(pos, defaults)]
    if args.posonlyargs:
        out.insert(len(args.posonlyargs), "/")
    if args.vararg is not None:
        out.append(one(args.vararg, star="*"))
    elif args.kwonlyargs:
        out.append("*")
    out += [one(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg is not None:
        out.append(one(args.kwarg, star="**"))
    return ", ".join(out)


_declared = {}


def _stub(name):
    if name not in _declared:
        _declared[name] = _Declared(name)
    return _declared[name]


def _explain(name, declared, args, kwargs):
    accepted, known = declared
    got = [type(a).__name__ for a in args] + ["%s=%s" % (k, type(v).__name__) for k, v in kwargs.items()]
    unknown = [k for k in kwargs if known and k not in known and k != "dim"]
    msg = "%s: " % name
    if unknown:
        msg += "no keyword %s; " % ", ".join(repr(k) for k in unknown)
    msg += "called with (%s); accepted: %s" % (", ".join(got), " or ".join(accepted) if accepted else "see help(bitgrad.%s)" % name)
    return msg


def _wrap(fn, name, stub, key, skip_self=False, method=False):
    """fn with dim= as axis= where it takes an axis, and a TypeError naming the signatures the
    stub declares for key instead of pybind11's overload dump. The stub is read at the first call
    that needs it (a dim= or a wrong call), not at import."""

    def declared():
        return _stub(stub).of(key)

    def wrapper(*args, **kwargs):
        if "dim" in kwargs and "axis" in declared()[1]:
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
            raise TypeError(_explain(owner + "." + name if method else name, declared(), shown, kwargs)) from None

    functools.update_wrapper(wrapper, fn)
    return wrapper


def install_nn(namespace):
    """The same for bitgrad.nn: its factory functions and the constructors of its C++ classes
    (signatures from nn.pyi)."""
    for name, obj in list(namespace.items()):
        if name.startswith("_"):
            continue
        if type(obj).__name__ == "builtin_function_or_method":
            namespace[name] = _wrap(obj, name, "nn.pyi", name)
        elif isinstance(obj, type) and "__init__" in vars(obj) and type(vars(obj)["__init__"]).__name__ == "instancemethod":
            obj.__init__ = _wrap(vars(obj)["__init__"], name, "nn.pyi", name + ".__init__", skip_self=True)
    module = namespace["Module"]  # its C++ methods (load_state_dict, init, ...)
    for name, fn in list(vars(module).items()):
        if not name.startswith("_") and type(fn).__name__ == "instancemethod":
            setattr(module, name, _wrap(fn, name, "nn.pyi", "Module." + name, method=True))


def install(namespace, tensor_cls):
    """Wraps the functions of `namespace` (a dict: the bitgrad package's) and the Tensor methods
    (signatures from __init__.pyi)."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not callable(fn) or isinstance(fn, type) or type(fn).__name__ != "builtin_function_or_method":
            continue
        namespace[name] = _wrap(fn, name, "__init__.pyi", name)
    for name in list(vars(tensor_cls)):
        if name.startswith("_"):
            continue
        fn = getattr(tensor_cls, name)
        if type(fn).__name__ != "instancemethod":
            continue
        setattr(tensor_cls, name, _wrap(fn, name, "__init__.pyi", "Tensor." + name, method=True))
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
