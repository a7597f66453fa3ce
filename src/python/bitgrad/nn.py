"""bitgrad.nn: modules (Linear, Conv2d, pools, LayerNorm, Embedding, Dropout, activations,
Sequential, the transformer blocks) and nn.Context, the training/evaluation switch that keys
dropout. Subclass nn.Module in Python as torch.nn.Module. See docs/python.md."""
import collections as _collections
import contextlib as _contextlib

from . import _bitgrad as _b
from . import _config

globals().update({k: v for k, v in vars(_b.nn).items() if not k.startswith("__")})
Flatten = _b.nn.Flatten
Module = _b.nn.Module
Sequential = _b.nn.Sequential
Context = _b.nn.Context
_Tensor = _b.Tensor
from ._pytorch_habits import install_nn as _install_nn  # noqa: E402

_install_nn(globals())  # a wrong keyword or type names what is accepted

# ---- modules written in Python ------------------------------------------------------
# A Python subclass of Module is a C++ nn::Module through a trampoline (src/python/pymodule.cpp):
# its parameters, buffers and children are registered in C++, in assignment order, so the
# optimizers, Sequential, fingerprints, initialisation and casts take it as any layer. What
# follows is its Python half: attribute registration, __call__ with the ambient context,
# train()/eval(), the traversals and the containers.


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _Tensor) and obj.requires_grad and obj.is_leaf


class Parameter(metaclass=_ParameterMeta):
    """torch.nn.Parameter: `Parameter(t)` is a leaf tensor sharing t's memory that requires grad.

    It is a bitgrad.Tensor (no subclass); `isinstance(x, nn.Parameter)` holds for any leaf tensor
    that requires grad, and assigning one to a module's attribute registers it as a parameter.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _b.empty(0)
        if not isinstance(data, _Tensor):
            raise TypeError("nn.Parameter: expected a bitgrad.Tensor, got %s" % type(data).__name__)
        t = data.detach()
        t.requires_grad = requires_grad
        return t


_object_setattr = object.__setattr__
_object_delattr = object.__delattr__
_cpp_repr = Module.__repr__
_cpp_named_buffers = Module.named_buffers


def _is_python(m):
    d = getattr(m, "__dict__", None)
    if d is None:  # a C++ layer (no instance dictionary)
        return False
    if "_bg_init" not in d:  # the C++ half is not made yet: touching it would crash
        raise TypeError("%s: call super().__init__() in __init__ before assigning attributes or calling the module"
                        % type(m).__name__)
    return m._python


def _kinds(m):
    d = m.__dict__
    k = d.get("_bg_kinds")
    if k is None:
        k = d["_bg_kinds"] = {}
    return k


def _setattr(self, name, value):
    if name.startswith("__"):
        return _object_setattr(self, name, value)
    if not _is_python(self):
        # PyTorch's tying, `head.weight = tok.weight`: the layer's parameter becomes that tensor
        if isinstance(value, _Tensor) and self._tie_parameter(name, value):
            return None
        try:
            return _object_setattr(self, name, value)
        except AttributeError:
            if isinstance(value, _Tensor) and name in dict(self.state_dict()):
                raise AttributeError("%s has no parameter '%s' to replace ('%s' is a buffer or a derived value)"
                                     % (type(self).__name__, name, name)) from None
            raise
    if name == "training":
        self._train(bool(value))
        return None
    kinds = _kinds(self)
    kind = kinds.get(name)
    if isinstance(value, Module):
        if kind and kind != "module":
            self._unregister(name)
        self._set_module(name, value)
        if value.training != self.training:
            value._train(self.training)
        kinds[name] = "module"
    elif isinstance(value, _Tensor) and kind == "buffer":
        self._set_buffer(name, value, self._buffer_persistent(name))
    elif isinstance(value, Parameter):
        if kind and kind != "parameter":
            self._unregister(name)
        self._set_parameter(name, value)
        kinds[name] = "parameter"
    elif kind is not None:
        if value is not None and kind == "parameter":
            raise TypeError("cannot assign a %s as parameter '%s' of %s (a tensor that requires grad, nn.Parameter, or None "
                            "expected)" % (type(value).__name__, name, type(self).__name__))
        if value is not None and kind == "module":
            raise TypeError("cannot assign a %s as child module '%s' of %s (a bitgrad.nn.Module or None expected)"
                            % (type(value).__name__, name, type(self).__name__))
        if value is not None and kind == "buffer":
            raise TypeError("cannot assign a %s as buffer '%s' of %s (a bitgrad.Tensor or None expected)"
                            % (type(value).__name__, name, type(self).__name__))
        self._unregister(name)
        del kinds[name]
    return _object_setattr(self, name, value)


def _delattr(self, name):
    if _is_python(self) and _kinds(self).pop(name, None):
        self._unregister(name)
    _object_delattr(self, name)


def _python_only(self, what):
    if not _is_python(self):
        raise TypeError("%s: %s is a C++ layer; %s is for modules written in Python (subclasses of bitgrad.nn.Module)"
                        % (what, type(self).__name__, what))


def register_parameter(self, name, param):
    """Registers `param` (a leaf tensor that requires grad, or None) under `name`, as assignment does."""
    _python_only(self, "register_parameter")
    if param is not None and not isinstance(param, Parameter):
        raise TypeError("register_parameter: '%s' must be a leaf tensor that requires grad (nn.Parameter) or None, got %s"
                        % (name, type(param).__name__))
    _setattr(self, name, param)


def register_buffer(self, name, tensor, persistent=True):
    """A tensor that is state but not trained (running statistics, masks): in buffers(), moved by
    to(dtype), in state_dict() when persistent, never given to an optimizer."""
    _python_only(self, "register_buffer")
    if tensor is None:
        return _object_setattr(self, name, None)
    if not isinstance(tensor, _Tensor):
        raise TypeError("register_buffer: '%s' must be a bitgrad.Tensor or None, got %s" % (name, type(tensor).__name__))
    kinds = _kinds(self)
    if kinds.get(name, "buffer") != "buffer":
        self._unregister(name)
    self._set_buffer(name, tensor, bool(persistent))
    kinds[name] = "buffer"
    _object_setattr(self, name, tensor)
    return None


def add_module(self, name, module):
    """Registers a child module under `name` (what assigning it to an attribute does)."""
    _python_only(self, "add_module")
    if module is not None and not isinstance(module, Module):
        raise TypeError("add_module: '%s' must be a bitgrad.nn.Module or None, got %s" % (name, type(module).__name__))
    _setattr(self, name, module)


def _call(self, *args, **kwargs):
    if not _is_python(self):
        return self._call(*args, **kwargs)
    if _b.nn._context() is not None:  # inside a forward, or `with bitgrad.nn.context(...)`
        return self.forward(*args, **kwargs)
    # a top-level call: the context the C++ modules inside get (seed, an automatic step)
    ctx = Context(training=self.training, seed=_b.initial_seed(), step=_b.nn._next_step() if self.training else 0)
    self._number_sites()
    _b.nn._push_context(ctx, False)
    try:
        return self.forward(*args, **kwargs)
    finally:
        _b.nn._pop_context()


def _forward_in_context(self, x, ctx):
    """A C++ caller's forward(x, ctx) (a C++ Sequential, checkpoint): its context for the modules inside."""
    _b.nn._push_context(ctx, True)
    try:
        return self.forward(x)
    finally:
        _b.nn._pop_context()


def _output_shape_of(self, shape):
    if type(self).output_shape is _cpp_output_shape:
        raise _b.InputError("%s.output_shape: not defined for this module written in Python; define output_shape(self, "
                            "input_shape) to use it where shapes are checked" % type(self).__name__)
    return tuple(self.output_shape(shape))


_cpp_output_shape = Module.output_shape
_cpp_forward = Module.forward


def _forward(self, *args, **kwargs):
    if _is_python(self):
        raise NotImplementedError("%s: a module written in Python defines forward(self, ...)" % type(self).__name__)
    return _cpp_forward(self, *args, **kwargs)


def _repr(self):
    if not _is_python(self):
        return _cpp_repr(self)
    lines = []
    for name, child in self.named_children():
        sub = repr(child).replace("\n", "\n  ")
        lines.append("  (%s): %s" % (name, sub))
    extra = self.extra_repr() if hasattr(self, "extra_repr") else ""
    if not lines:
        return "%s(%s)" % (type(self).__name__, extra)
    return "%s(%s\n%s\n)" % (type(self).__name__, extra, "\n".join(lines))


def buffers(self):
    """The buffers of this module and its descendants, in registration order."""
    return [t for _, t in _cpp_named_buffers(self)]


def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    """(name, module) of this module ('') and every descendant, depth-first in registration order;
    a module reachable under two names is listed once, under the first (PyTorch's
    remove_duplicate)."""
    if memo is None:
        memo = set()
    if remove_duplicate:
        if id(self) in memo:
            return []
        memo.add(id(self))
    out = [(prefix, self)]
    for name, child in self.named_children():
        out += child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)
    return out


def modules(self):
    """This module and every descendant, depth-first in registration order."""
    return [m for _, m in self.named_modules()]


def train(self, mode=True):
    """Training mode for this module and every descendant (dropout draws, batch norm uses the batch); returns self."""
    self._train(bool(mode))
    return self


def eval(self):
    """Evaluation mode (train(False)); returns self."""
    return self.train(False)


def requires_grad_(self, requires_grad=True):
    """Sets requires_grad of every parameter (False freezes them); returns self."""
    for p in self.parameters():
        p.requires_grad = requires_grad
    return self


def apply(self, fn):
    """fn(m) for every descendant, children first, then self; returns self (for initialising layers)."""
    for child in self.children():
        child.apply(fn)
    fn(self)
    return self


def to(self, dtype):
    """Every parameter and floating buffer converted to dtype in place (bitgrad.float32 or float64); returns self.
    A device string ('cpu') is accepted and changes nothing."""
    if isinstance(dtype, str):
        if dtype != "cpu":
            raise _b.InputError("Module.to: bitgrad runs on the CPU; got device '%s'" % dtype)
        return self
    if dtype not in (_b.float32, _b.float64):
        raise _b.InputError("Module.to: expected bitgrad.float32 or bitgrad.float64, got %r" % (dtype,))
    self._cast(dtype)
    return self


def float(self):  # noqa: A001
    return self.to(_b.float32)


def double(self):
    return self.to(_b.float64)


Module.__setattr__ = _setattr
Module.__delattr__ = _delattr
Module.__call__ = _call
Module.__repr__ = _repr
Module.forward = _forward
Module._forward_in_context = _forward_in_context
Module._output_shape_of = _output_shape_of
Module.register_module = add_module
for _f in (register_parameter, register_buffer, add_module, buffers, named_modules, modules, train, eval, requires_grad_, apply,
           to, float, double):
    setattr(Module, _f.__name__, _f)
    del globals()[_f.__name__]  # methods, not functions of bitgrad.nn
del _f

def _recurrent_call(self, x, h0=None, c0=None):
    """PyTorch's return: (output, h_n), or (output, (h_n, c_n)) for an LSTM, so that
    `out, _ = lstm(x)` unpacks what it does in PyTorch; with bitgrad's last_only, the last step's
    output [N, H] alone (what the module gives inside a Sequential)."""
    if self.last_only:
        if h0 is not None or c0 is not None:
            raise _b.InputError("%s(last_only=True): initial states are given to run(x, h0, c0), which returns them too"
                                % type(self).__name__)
        return _call(self, x)
    return self.run(x, h0, c0)


_b.nn._Recurrent.__call__ = _recurrent_call
del _recurrent_call


IncompatibleKeys = _collections.namedtuple("IncompatibleKeys", "missing_keys unexpected_keys")
IncompatibleKeys.__doc__ = "What load_state_dict returns: the keys the state lacked and the keys the module lacks."


class ModuleList(Module):
    """torch.nn.ModuleList: modules in a list, registered under '0', '1', ..."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __len__(self):
        return len(self.named_children())

    def __getitem__(self, i):
        children = self.children()
        if isinstance(i, slice):
            return ModuleList(children[i])
        return children[i]

    def __iter__(self):
        return iter(self.children())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: call its modules")


class ModuleDict(Module):
    """torch.nn.ModuleDict: modules by name, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m

    def __setitem__(self, key, module):
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError("ModuleDict: keys are non-empty strings without '.', got %r" % (key,))
        setattr(self, key, module)

    def __getitem__(self, key):
        for k, m in self.named_children():
            if k == key:
                return m
        raise KeyError(key)

    def __delitem__(self, key):
        self[key]  # noqa: B018 (KeyError when absent)
        delattr(self, key)

    def __contains__(self, key):
        return any(k == key for k, _ in self.named_children())

    def __len__(self):
        return len(self.named_children())

    def __iter__(self):
        return iter(self.keys())

    def keys(self):
        return [k for k, _ in self.named_children()]

    def values(self):
        return self.children()

    def items(self):
        return self.named_children()

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward: call its modules")


@_contextlib.contextmanager
def context(ctx=None, *, seed=None, step=None, row_offset=0, precision="fp32", stochastic=False):
    """The nn.Context of the forwards inside the block: `with bitgrad.nn.context(step=k):`.

    The C++ modules that a forward written in Python calls take seed, step, row_offset,
    precision and stochastic from it (each its own train()/eval() mode). seed defaults to
    bitgrad.initial_seed(), step to the generator's next automatic step. Without a block, each
    top-level training call of a module takes the next automatic step itself.
    """
    if ctx is None:
        ctx = Context(seed=_b.initial_seed() if seed is None else seed, step=_b.nn._next_step() if step is None else step,
                      row_offset=row_offset, precision=precision, stochastic=stochastic)
    elif not isinstance(ctx, Context):
        raise TypeError("nn.context: expected an nn.Context or keywords, got %s" % type(ctx).__name__)
    _b.nn._push_context(ctx, False)
    try:
        yield ctx
    finally:
        _b.nn._pop_context()


# ---- the configuration's layer list -------------------------------------------------
def from_layers(layers, input_shape, *, vocabulary=0, seed=None, weights="kaiming_uniform"):
    """A Sequential of a configuration's [model] layers, built as `bitgrad train` builds them.

    layers: dicts as the TOML's inline tables, e.g. [{"type": "conv", "out": 16, "kernel": 3},
    {"type": "relu"}] (docs/cli.md lists every type and option; bitgrad.nn.layer_kinds() the
    types). input_shape: the input's shape with its batch, e.g. [1, 3, 32, 32]. vocabulary: the
    number of tokens when the inputs are token windows [N, T] (an embedding, a linear with
    out = 0). seed: the initialisation's (None: drawn from the program's generator), weights as
    the configuration's [model] init. Errors name the layer and the key, as the trainer's do.
    """
    if isinstance(layers, dict) or not isinstance(layers, (list, tuple)):
        raise TypeError("nn.from_layers: layers is a %s; expected a list of dicts such as [{'type': 'relu'}]" % type(layers).__name__)
    lines = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise TypeError("nn.from_layers: layers[%d] is a %s; expected a dict such as {'type': 'relu'}" % (i, type(layer).__name__))
        items = []
        for key, value in layer.items():
            if not isinstance(key, str) or not key or not all(c.isalnum() or c in "_-" for c in key) or not key.isascii():
                raise ValueError("nn.from_layers: layers[%d] has the key %r; keys are option names such as 'out'" % (i, key))
            items.append("%s = %s" % (key, _config._value(value, "layers[%d].%s" % (i, key))))
        lines.append("  { " + ", ".join(items) + " },")
    text = '[data]\ndataset = "synthetic"\n[model]\nlayers = [\n' + "\n".join(lines) + "\n]\n"
    vocabulary = _whole("vocabulary", vocabulary, 0)
    if vocabulary == 0 and any(layer.get("type") == "embedding" for layer in layers):
        raise _b.InputError("nn.from_layers: an embedding reads token ids: give vocabulary= (the number of tokens)")
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise TypeError("nn.from_layers: input_shape is a %s; expected the input's shape with its batch, e.g. [1, 3, 32, 32]"
                        % type(input_shape).__name__)
    shape = [_whole("input_shape[%d]" % i, d, 1) for i, d in enumerate(input_shape)]
    return _b.nn._from_layers(text, shape, vocabulary, seed, weights)


def _whole(what, v, lowest):
    """v as a whole number from `lowest` to 2^63 - 1 (a bool, a float or a string is refused, not truncated)."""
    if isinstance(v, (bool, float, str, bytes)) or not hasattr(v, "__index__"):
        raise TypeError("nn.from_layers: %s is a %s; expected a whole number" % (what, type(v).__name__))
    v = v.__index__()
    if not lowest <= v <= 2 ** 63 - 1:
        raise _b.InputError("nn.from_layers: %s is %d; expected a whole number from %d to 2^63 - 1" % (what, v, lowest))
    return v
