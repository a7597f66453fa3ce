"""The ONNX op types bitgrad runs, one table entry each (docs/onnx.md).

An entry is `@op("OpType", types=...)` over a function of one `Node` (its attributes, its inputs
as bitgrad tensors, its opset) returning the outputs: a bitgrad tensor, a `Value` (a tensor and
its ONNX element type, where that is not the first input's), or a list of them (None for an
output the node does not ask for). Whatever the entry cannot do exactly raises `Skip` with the
reason: an attribute combination, a dtype, a value. Nothing is approximated: an entry calls bitgrad's
op of the same meaning, or where bitgrad has none and ONNX defines the op as a composition
(HardSigmoid = clamp(alpha x + beta, 0, 1), the RNN equations), computes that composition with
bitgrad's ops. An entry for an op the module may not have yet (bound("abs")) skips until it does.
NumPy only reads shapes and index inputs
(attribute-like inputs: Reshape's shape, Slice's starts, Gather's indices): every number an output
holds is computed by bitgrad.

Dtypes: ONNX types bitgrad has no dtype for are stored in one that holds every value exactly
(STORAGE below: bool -> uint8 0/1; int8/int16/int32/uint16/uint32 -> int64; uint64 -> int64 when
every value is below 2^63). A value keeps its ONNX type beside the tensor, so an output's type is
checked against the expected one and its values compared exactly. float16 and bfloat16 are
storage only in bitgrad (ops refuse them): Cast, Identity and the pure data movers take them,
the rest skip.
"""
import math

import numpy as np
from onnx import TensorProto as TP

import bitgrad as bg


class Skip(Exception):
    """The op, attribute combination, dtype or value is outside what bitgrad implements."""


# ---- dtypes ----------------------------------------------------------------------------------
TYPE_NAMES = {TP.FLOAT: "float32", TP.DOUBLE: "float64", TP.FLOAT16: "float16", TP.BFLOAT16: "bfloat16",
              TP.INT64: "int64", TP.INT32: "int32", TP.INT16: "int16", TP.INT8: "int8", TP.UINT64: "uint64",
              TP.UINT32: "uint32", TP.UINT16: "uint16", TP.UINT8: "uint8", TP.BOOL: "bool", TP.STRING: "string",
              TP.COMPLEX64: "complex64", TP.COMPLEX128: "complex128"}

# ONNX element type -> the bitgrad dtype that holds its values (the mapping docs/onnx.md states)
STORAGE = {TP.FLOAT: bg.float32, TP.DOUBLE: bg.float64, TP.FLOAT16: bg.float16, TP.BFLOAT16: bg.bfloat16,
           TP.INT64: bg.int64, TP.INT32: bg.int64, TP.INT16: bg.int64, TP.INT8: bg.int64, TP.UINT64: bg.int64,
           TP.UINT32: bg.int64, TP.UINT16: bg.int64, TP.UINT8: bg.uint8, TP.BOOL: bg.uint8}
# ONNX element type -> NumPy dtype of the expected values (bfloat16: numpy_helper gives raw uint16 bits)
NUMPY = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16, TP.BFLOAT16: np.float32,
         TP.INT64: np.int64, TP.INT32: np.int32, TP.INT16: np.int16, TP.INT8: np.int8, TP.UINT64: np.uint64,
         TP.UINT32: np.uint32, TP.UINT16: np.uint16, TP.UINT8: np.uint8, TP.BOOL: np.bool_}
# a bitgrad dtype's own ONNX type (an op output whose type no input fixes)
NATIVE = {bg.float32: TP.FLOAT, bg.float64: TP.DOUBLE, bg.float16: TP.FLOAT16, bg.bfloat16: TP.BFLOAT16,
          bg.int64: TP.INT64, bg.uint8: TP.UINT8}
INT_RANGE = {TP.INT64: (-2**63, 2**63 - 1), TP.INT32: (-2**31, 2**31 - 1), TP.INT16: (-2**15, 2**15 - 1),
             TP.INT8: (-128, 127), TP.UINT64: (0, 2**63 - 1), TP.UINT32: (0, 2**32 - 1), TP.UINT16: (0, 2**16 - 1),
             TP.UINT8: (0, 255), TP.BOOL: (0, 1)}

F = frozenset({TP.FLOAT, TP.DOUBLE})                      # what bitgrad's arithmetic computes in
INTS = frozenset({TP.INT64, TP.INT32, TP.INT16, TP.INT8, TP.UINT64, TP.UINT32, TP.UINT16, TP.UINT8})
IDX = frozenset({TP.INT64, TP.INT32})                     # index inputs
BOOL = frozenset({TP.BOOL})
ANY = frozenset(STORAGE)                                  # data movers: every value kept exactly
NUMERIC = F | INTS | BOOL                                 # every type with arithmetic values (not the 16-bit floats)


def type_name(t):
    return TYPE_NAMES.get(t, "type %d" % t)


class Value:
    """A bitgrad tensor and the ONNX element type whose values it holds."""
    __slots__ = ("t", "ty")

    def __init__(self, t, ty):
        self.t = t
        self.ty = ty


def to_value(a, ty):
    """A NumPy array of ONNX type ty (as numpy_helper reads it) as a Value."""
    if ty not in STORAGE:
        raise Skip("%s data: bitgrad has no dtype that holds it" % type_name(ty))
    if ty == TP.BFLOAT16:  # raw bits: widen to the float32 of the same value, exactly, then store as bf16
        f = (np.array(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        return Value(bg.tensor(f, dtype=bg.float32).to(bg.bfloat16), ty)
    if ty == TP.UINT64 and a.size and int(a.max()) >= 2**63:
        raise Skip("uint64 values at or above 2^63: int64 cannot hold them")
    if ty in INTS or ty == TP.BOOL:
        a = a.astype(np.int64 if STORAGE[ty] == bg.int64 else np.uint8)
    return Value(bg.tensor(np.array(a, order="C"), dtype=STORAGE[ty]), ty)


def to_numpy(v):
    """The values of a Value as NumPy, in its ONNX type's NumPy dtype (bfloat16 as float32 values)."""
    t = bg.contiguous(v.t)
    if t.dtype == bg.bfloat16:
        return np.array(t.to(bg.float32).numpy())
    a = np.array(t.numpy())
    if v.ty in INT_RANGE and a.size:
        lo, hi = INT_RANGE[v.ty]
        if int(a.min()) < lo or int(a.max()) > hi:
            raise Skip("%s result out of range (%d..%d): bitgrad computed it in %s and has no %s wraparound"
                       % (type_name(v.ty), int(a.min()), int(a.max()), t.dtype.name, type_name(v.ty)))
    return a.astype(NUMPY[v.ty])


# ---- the node an entry sees --------------------------------------------------------------------
class Node:
    def __init__(self, proto, attrs, inputs, opset, n_outputs):
        self.proto = proto
        self.op_type = proto.op_type
        self.attrs = attrs          # name -> Python value (tensors as NumPy arrays)
        self.vals = inputs          # Value or None (an absent optional input)
        self.opset = opset          # the default domain's opset version of the model
        self.n_outputs = n_outputs  # outputs asked for: a list of bools, by position
        self.used = set()

    def attr(self, name, default=None):
        self.used.add(name)
        return self.attrs.get(name, default)

    def has(self, i):
        return i < len(self.vals) and self.vals[i] is not None

    def x(self, i):
        if not self.has(i):
            raise Skip("input %d is absent" % i)
        return self.vals[i].t

    def ty(self, i):
        return self.vals[i].ty

    def np(self, i):
        """An attribute-like input (a shape, axes, indices, a bound) as NumPy: read, not computed."""
        return to_numpy(self.vals[i])

    def wants(self, i):
        return i < len(self.n_outputs) and self.n_outputs[i]

    def ints(self, name, default=None):
        v = self.attr(name, default)
        return None if v is None else [int(e) for e in v]


# ---- the table ---------------------------------------------------------------------------------
OPS = {}

# Why the node in hand was computed by a composition the runner writes rather than by a bitgrad op
# of the op's meaning (node_runner clears it per test; a pass with a route counts as "composed",
# not as a pass: docs/onnx.md). Data movement (reshapes, transposes, padding written out with
# concat) and argument translation do not count; arithmetic the runner spells out does.
ROUTE = []


def composed(why):
    ROUTE.append(why)


def op(*names, types=NUMERIC):
    """Registers fn for the ONNX op types `names`. `types`: the ONNX element types every present input may
    have (a set), or one set per input position (a list; the last one repeats for variadic inputs); any other
    input type is a Skip naming it."""
    def reg(fn):
        for name in names:
            OPS[name] = (fn, types)
        return fn
    return reg


def check_types(node, types):
    for i, v in enumerate(node.vals):
        if v is None:
            continue
        allowed = types if isinstance(types, (set, frozenset)) else types[min(i, len(types) - 1)]
        if v.ty not in allowed:
            names = sorted(type_name(t) for t in allowed)
            raise Skip("%s input %d: the mapping of %s takes %s" % (type_name(v.ty), i, node.op_type, ", ".join(names)))


def bound(name, what=None):
    """bitgrad.<name>, or a Skip when the module has no such op (yet)."""
    f = getattr(bg, name, None)
    if f is None:
        raise Skip("bitgrad has no %s op" % (what or name))
    return f


def axis_of(a, ndim):
    a = int(a)
    if not -ndim <= a < max(ndim, 1):
        raise Skip("axis %d out of range for rank %d" % (a, ndim))
    return a + ndim if a < 0 else a


def same_types(node):
    tys = {v.ty for v in node.vals if v is not None}
    if len(tys) > 1:
        raise Skip("inputs of different types: %s" % ", ".join(sorted(type_name(t) for t in tys)))


# ---- integers: bitgrad's arithmetic is float-only --------------------------------------------
EXACT = 2**53  # every integer below it in magnitude is a float64, and +, -, *, max, min of such are exact


def to_f64(v):
    """An integer Value's values as a float64 tensor, exactly (a Skip beyond 2^53)."""
    a = to_numpy(v)
    if a.size and np.abs(a.astype(np.float64)).max() >= EXACT:
        raise Skip("%s values beyond 2^53 (integers go through float64)" % type_name(v.ty))
    return v.t.to(bg.float64)


def from_f64(t, ty):
    """A float64 result of integer inputs back in ONNX type ty: integral and in range, else a Skip."""
    r = np.array(bg.contiguous(t).numpy())
    lo, hi = INT_RANGE[ty]
    if r.size and not (np.isfinite(r).all() and (r == np.trunc(r)).all() and r.min() >= max(lo, -EXACT)
                       and r.max() <= min(hi, EXACT)):
        raise Skip("a %s result outside the type's range (bitgrad has no integer wraparound)" % type_name(ty))
    return Value(t.to(STORAGE[ty]), ty)


def exact_ints(fn):
    """fn over float inputs; integer inputs go through float64, exactly: every input value and every result
    below 2^53 in magnitude (checked; else a Skip), and the result back in the inputs' ONNX type."""
    def run(n):
        ity = next((v.ty for v in n.vals if v is not None and v.ty in INTS), None)
        if ity is None:
            return fn(n)
        composed("integers computed in float64 (bitgrad's arithmetic is float-only)")
        same_types(n)
        saved = n.vals  # the graph's own values stay as they are
        n.vals = [Value(to_f64(v), v.ty) if v is not None and v.ty in INTS else v for v in saved]
        try:
            out = fn(n)
        finally:
            n.vals = saved
        return from_f64(out.t if isinstance(out, Value) else out, ity)
    return run


# ---- elementwise -------------------------------------------------------------------------------
def _binary(fn_name):
    def run(n):
        same_types(n)
        return getattr(bg, fn_name)(n.x(0), n.x(1))
    return run


for _onnx, _bg in (("Add", "add"), ("Sub", "sub"), ("Mul", "mul")):
    op(_onnx, types=F | INTS)(exact_ints(_binary(_bg)))
op("Div", types=F)(_binary("div"))


@op("Pow", types=[F, F | INTS])
def _pow(n):
    x, y = n.x(0), n.x(1)
    if n.ty(1) in INTS:  # an integer exponent: its value in x's float type, exactly (|y| < 2^24)
        e = n.np(1)
        if e.size and np.abs(e.astype(np.float64)).max() >= 2**24:
            raise Skip("integer exponent beyond 2^24: not exact in float32")
        y = y.to(x.dtype)
    elif n.ty(1) != n.ty(0):
        y = y.to(x.dtype) if n.ty(1) == TP.FLOAT else None
        if y is None:
            raise Skip("float64 exponent of a float32 base")
    return Value(bg.pow(x, y), n.ty(0))


_UNARY = {"Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Tanh": "tanh", "Sigmoid": "sigmoid",
          "Relu": "relu", "Softplus": "softplus", "Abs": "abs", "Erf": "erf", "Sin": "sin", "Cos": "cos",
          "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
          "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Floor": "floor", "Ceil": "ceil", "Sign": "sign",
          "Softsign": "softsign", "Round": "round"}


def _unary(fn_name):
    return lambda n: bound(fn_name)(n.x(0))


for _onnx, _bg in _UNARY.items():
    op(_onnx, types=F)(_unary(_bg))
op("Neg", types=F | INTS)(exact_ints(_unary("neg")))
op("Abs", types=F | INTS)(exact_ints(_unary("abs")))


@op("Reciprocal", types=F)
def _reciprocal(n):
    f = getattr(bg, "reciprocal", None)
    if f is None:
        composed("1 / x (no reciprocal op)")
    return f(n.x(0)) if f else 1.0 / n.x(0)  # one IEEE division either way


@op("HardSigmoid", types=F)
def _hard_sigmoid(n):  # max(0, min(1, alpha x + beta)), the ONNX definition
    x = n.x(0)
    if getattr(bg, "hardsigmoid", None) is not None:
        return bg.hardsigmoid(x, float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5)))
    composed("clamp(alpha x + beta, 0, 1) (no hardsigmoid op)")
    return bg.clamp(x * float(n.attr("alpha", 0.2)) + float(n.attr("beta", 0.5)), 0.0, 1.0)


@op("HardSwish", types=F)
def _hard_swish(n):  # x * HardSigmoid(x; alpha 1/6, beta 0.5)
    x = n.x(0)
    if getattr(bg, "hardswish", None) is not None:
        return bg.hardswish(x)
    composed("x clamp(x / 6 + 1/2, 0, 1) (no hardswish op)")
    return x * bg.clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _variadic(fn_name):
    def run(n):
        same_types(n)
        return getattr(bg, fn_name)([n.x(i) for i in range(len(n.vals))])
    return run


op("Max", types=F | INTS)(exact_ints(_variadic("max_of")))
op("Min", types=F | INTS)(exact_ints(_variadic("min_of")))
op("Sum", types=F | INTS)(exact_ints(_variadic("sum_of")))
op("Mean", types=F)(_variadic("mean_of"))


@op("Clip", types=F | INTS)
@exact_ints
def _clip(n):
    x = n.x(0)
    if n.opset < 11:
        lo, hi = n.attr("min", None), n.attr("max", None)
    else:
        lo = float(n.np(1).reshape(())) if n.has(1) else None
        hi = float(n.np(2).reshape(())) if n.has(2) else None
    lo = -math.inf if lo is None else float(lo)
    hi = math.inf if hi is None else float(hi)
    if lo > hi:
        raise Skip("min %g > max %g" % (lo, hi))
    return bg.clamp(x, lo, hi)


@op("Where", types=[BOOL, F | INTS, F | INTS])
def _where(n):
    if n.ty(1) != n.ty(2):
        raise Skip("X and Y of different types")
    cond = n.vals[0]
    n.vals[0] = None  # the condition stays as it is; X and Y are the data
    try:
        return exact_ints(lambda m: Value(bg.where(cond.t, m.x(1), m.x(2)), m.ty(1)))(n)
    finally:
        n.vals[0] = cond


@op("Identity", types=ANY)
def _identity(n):
    return n.vals[0]


# ---- Cast ------------------------------------------------------------------------------------
def cast_value(v, to):
    """v converted to ONNX type `to` as numpy's astype does (what ONNX 1.12's test data were made with)."""
    if to not in STORAGE:
        raise Skip("cast to %s: bitgrad has no dtype that holds it" % type_name(to))
    src, t = v.ty, v.t
    if src == to:
        return Value(t, to)
    if to == TP.BFLOAT16 and src != TP.BFLOAT16:
        raise Skip("cast to bfloat16: ONNX 1.12's test data truncate the float32 bits; bitgrad rounds to nearest even "
                   "(as later ONNX versions do)")
    if to == TP.BOOL:  # nonzero -> 1
        if src in INTS:
            a = to_numpy(v)
            if a.size and np.abs(a.astype(np.float64)).max() >= 2**53:
                raise Skip("cast %s -> bool of values beyond 2^53" % type_name(src))
        f = t if t.dtype in (bg.float32, bg.float64) else t.to(bg.float64)
        one, zero = bg.scalar(1.0, dtype=f.dtype), bg.scalar(0.0, dtype=f.dtype)
        return Value(bg.where(f, one, zero).to(bg.uint8), to)
    if to in INT_RANGE and src not in INT_RANGE:  # float -> integer: truncation toward zero
        a = to_numpy(v).astype(np.float64)
        lo, hi = INT_RANGE[to]
        if a.size and (not np.isfinite(a).all() or a.min() <= lo - 1 or a.max() >= hi + 1):
            raise Skip("cast %s -> %s of a value outside the target's range (or NaN, inf)" % (type_name(src), type_name(to)))
        return Value(t.to(STORAGE[to]), to)
    if to in INT_RANGE and src in INT_RANGE:
        a = to_numpy(v)
        lo, hi = INT_RANGE[to]
        if a.size and (int(a.min()) < lo or int(a.max()) > hi):
            raise Skip("cast %s -> %s of a value outside the target's range (numpy wraps)" % (type_name(src), type_name(to)))
        return Value(t.to(STORAGE[to]), to)
    if src in INT_RANGE and to in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        a = to_numpy(v)
        if a.size and np.abs(a.astype(np.float64)).max() >= 2**53:
            raise Skip("cast of integers beyond 2^53 (bitgrad converts through float64)")
    if src == TP.DOUBLE and to == TP.BFLOAT16:
        raise Skip("cast float64 -> bfloat16")
    return Value(t.to(STORAGE[to]), to)


@op("Cast", types=ANY)
def _cast(n):
    return cast_value(n.vals[0], int(n.attr("to")))


@op("CastLike", types=ANY)
def _cast_like(n):
    return cast_value(n.vals[0], n.ty(1))


# ---- constants and shapes ----------------------------------------------------------------------
@op("Constant", types=ANY)
def _constant(n):
    for name in ("sparse_value", "value_string", "value_strings"):
        if n.attr(name) is not None:
            raise Skip("Constant %s" % name)
    if n.attr("value") is not None:
        a, ty = n.attr("value")
        return to_value(a, ty)
    for name, dtype, ty in (("value_float", np.float32, TP.FLOAT), ("value_floats", np.float32, TP.FLOAT),
                            ("value_int", np.int64, TP.INT64), ("value_ints", np.int64, TP.INT64)):
        if n.attr(name) is not None:
            return to_value(np.array(n.attr(name), dtype), ty)
    raise Skip("Constant without a value")


@op("ConstantOfShape", types=[{TP.INT64}])
def _constant_of_shape(n):
    shape = [int(d) for d in n.np(0)]
    a, ty = n.attr("value", (np.zeros(1, np.float32), TP.FLOAT))
    if ty not in STORAGE or ty in (TP.FLOAT16, TP.BFLOAT16):
        raise Skip("ConstantOfShape of %s" % type_name(ty))
    v = a.reshape(-1)[0]
    if ty in INTS and abs(int(v)) >= 2**53:
        raise Skip("a fill value beyond 2^53")
    return Value(bg.full(shape, float(v), dtype=STORAGE[ty]), ty)


@op("Shape", types=ANY)
def _shape(n):
    shape = list(n.x(0).shape)
    r = len(shape)
    start, end = int(n.attr("start", 0)), n.attr("end", None)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = r if end is None else int(end)
    end = min(max(end + r if end < 0 else end, 0), r)
    return to_value(np.array(shape[start:end], np.int64), TP.INT64)


@op("Size", types=ANY)
def _size(n):
    return to_value(np.array(n.x(0).numel(), np.int64), TP.INT64)


@op("Reshape", types=[ANY, {TP.INT64}])
def _reshape(n):
    x = n.x(0)
    if n.opset < 5:
        raise Skip("Reshape-1 (shape as an attribute)")
    dims = [int(d) for d in n.np(1)]
    allowzero = int(n.attr("allowzero", 0))
    if not allowzero:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return Value(bg.reshape(x, dims), n.ty(0))


@op("Flatten", types=ANY)
def _flatten(n):
    x = n.x(0)
    axis = int(n.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))
    return Value(bg.reshape(x, [outer, inner]), n.ty(0))


@op("Squeeze", types=[ANY, {TP.INT64}])
def _squeeze(n):
    x = n.x(0)
    axes = n.ints("axes") if n.opset < 13 else ([int(a) for a in n.np(1)] if n.has(1) else None)
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = {axis_of(a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise Skip("Squeeze of an axis whose size is not 1")
    return Value(bg.squeeze(x, sorted(axes)) if axes else x, n.ty(0))


@op("Unsqueeze", types=[ANY, {TP.INT64}])
def _unsqueeze(n):
    x = n.x(0)
    axes = n.ints("axes") if n.opset < 13 else [int(a) for a in n.np(1)]
    r = x.ndim + len(axes)
    return Value(bg.unsqueeze(x, sorted(axis_of(a, r) for a in axes)), n.ty(0))


@op("Transpose", types=ANY)
def _transpose(n):
    x = n.x(0)
    perm = n.ints("perm") or list(range(x.ndim))[::-1]
    return Value(bg.contiguous(bg.permute(x, perm)), n.ty(0))


@op("Expand", types=[ANY, {TP.INT64}])
def _expand(n):
    x = n.x(0)
    shape = np.broadcast_shapes(tuple(x.shape), tuple(int(d) for d in n.np(1)))
    return Value(bg.contiguous(bg.expand(x, list(shape))), n.ty(0))


@op("Concat", types=ANY)
def _concat(n):
    same_types(n)
    xs = [n.x(i) for i in range(len(n.vals))]
    return Value(bg.concat(xs, axis_of(n.attr("axis"), xs[0].ndim)), n.ty(0))


@op("Tile", types=[ANY, {TP.INT64}])
def _tile(n):
    x = n.x(0)
    reps = [int(r) for r in n.np(1)]
    if len(reps) != x.ndim:
        raise Skip("repeats of length %d for rank %d" % (len(reps), x.ndim))
    return Value(bg.tile(x, reps), n.ty(0))


def _space_depth(n, to_depth):
    x = n.x(0)
    b = int(n.attr("blocksize"))
    if x.ndim != 4:
        raise Skip("rank %d input" % x.ndim)
    N, C, H, W = x.shape
    if to_depth:  # SpaceToDepth: [N, C, H/b, b, W/b, b] -> permute (0, 3, 5, 1, 2, 4) -> [N, C b b, H/b, W/b]
        y = bg.permute(bg.reshape(x, [N, C, H // b, b, W // b, b]), [0, 3, 5, 1, 2, 4])
        return Value(bg.reshape(bg.contiguous(y), [N, C * b * b, H // b, W // b]), n.ty(0))
    mode = n.attr("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "DCR":
        y = bg.permute(bg.reshape(x, [N, b, b, C // (b * b), H, W]), [0, 3, 4, 1, 5, 2])
    else:
        y = bg.permute(bg.reshape(x, [N, C // (b * b), b, b, H, W]), [0, 1, 4, 2, 5, 3])
    return Value(bg.reshape(bg.contiguous(y), [N, C // (b * b), H * b, W * b]), n.ty(0))


op("DepthToSpace", types=ANY)(lambda n: _space_depth(n, False))
op("SpaceToDepth", types=ANY)(lambda n: _space_depth(n, True))


@op("Slice", types=[ANY, IDX])
def _slice(n):
    x = n.x(0)
    if n.opset < 10:
        starts, ends, axes, steps = n.ints("starts"), n.ints("ends"), n.ints("axes"), None
    else:
        starts, ends = [int(v) for v in n.np(1)], [int(v) for v in n.np(2)]
        axes = [int(v) for v in n.np(3)] if n.has(3) else None
        steps = [int(v) for v in n.np(4)] if n.has(4) else None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_of(a, x.ndim)
        if st == 0:
            raise Skip("step 0")
        # ONNX clamps as Python's slices do (int64 extremes included)
        lo, hi, step = slice(s, e, st).indices(x.shape[a])
        if step > 0:
            x = bg.slice(x, a, lo, max(hi, lo), step)
        else:  # a negative step: the indices in their order
            idx = np.arange(lo, hi, step, dtype=np.int64)
            x = bg.index_select(x, a, bg.tensor(idx, dtype=bg.int64))
    return Value(bg.contiguous(x), n.ty(0))


def _indices(n, i, size):
    idx = n.np(i).astype(np.int64)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise Skip("an index out of range (ONNX leaves it undefined)")
    return np.where(idx < 0, idx + size, idx)


@op("Gather", types=[ANY, IDX])
def _gather(n):
    x = n.x(0)
    axis = axis_of(n.attr("axis", 0), x.ndim)
    idx = _indices(n, 1, x.shape[axis])
    y = bg.index_select(x, axis, bg.tensor(idx.reshape(-1), dtype=bg.int64))
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    return Value(bg.reshape(y, shape), n.ty(0))


@op("GatherElements", types=[F, IDX])
def _gather_elements(n):
    x = n.x(0)
    axis = axis_of(n.attr("axis", 0), x.ndim)
    idx = _indices(n, 1, x.shape[axis])
    return bg.gather(x, axis, bg.tensor(idx, dtype=bg.int64))


# ---- reductions ------------------------------------------------------------------------------
def _reduce_axes(n, axes_input):
    x = n.x(0)
    if axes_input:
        axes = [int(a) for a in n.np(1)] if n.has(1) else []
    else:
        axes = n.ints("axes") or []
    keep = bool(n.attr("keepdims", 1))
    noop = bool(n.attr("noop_with_empty_axes", 0))
    if not axes and noop:
        return x, None, keep
    axes = sorted({axis_of(a, x.ndim) for a in axes}) if axes else list(range(x.ndim))
    return x, axes, keep


def _reduce(fn_name):
    """bitgrad.<fn_name>(x, axes, keepdim): ReduceSum -> sum, ReduceL2 -> norm_l2, ..."""
    def run(n):
        x, axes, keep = _reduce_axes(n, n.op_type == "ReduceSum" and n.opset >= 13)
        if axes is None:  # noop_with_empty_axes
            return x
        return getattr(bg, fn_name)(x, axes if x.ndim else None, keep)
    return run


op("ReduceSum", types=[F, {TP.INT64}])(_reduce("sum"))
op("ReduceSumSquare", types=F)(_reduce("sum_square"))
op("ReduceL2", types=F)(_reduce("norm_l2"))
op("ReduceL1", types=F)(_reduce("norm_l1"))
op("ReduceLogSum", types=F)(_reduce("log_sum"))
op("ReduceLogSumExp", types=F)(_reduce("logsumexp"))
op("ReduceMean", types=F)(_reduce("mean"))
op("ReduceMax", types=F)(_reduce("amax"))
op("ReduceMin", types=F)(_reduce("amin"))
op("ReduceProd", types=F)(_reduce("prod"))


def _arg(fn_name):
    def run(n):
        x = n.x(0)
        axis = axis_of(n.attr("axis", 0), x.ndim)
        keep = bool(n.attr("keepdims", 1))
        last = bool(n.attr("select_last_index", 0))
        return Value(getattr(bg, fn_name)(x, axis, keep, select_last_index=last), TP.INT64)
    return run


op("ArgMax", types=F | {TP.INT64, TP.INT32})(_arg("argmax"))
op("ArgMin", types=F | {TP.INT64, TP.INT32})(_arg("argmin"))


# ---- linear algebra and networks -------------------------------------------------------------
@op("MatMul", types=F)
def _matmul(n):
    same_types(n)
    a, b = n.x(0), n.x(1)
    a1, b1 = a.ndim == 1, b.ndim == 1  # NumPy's 1-d operands: a row, a column, dropped from the result
    if a1:
        a = bg.reshape(a, [1, a.shape[0]])
    if b1:
        b = bg.reshape(b, [b.shape[0], 1])
    if a.ndim > 2 or b.ndim > 2:
        batch = list(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        # bitgrad: equal batch dimensions, or b 2-d and shared; other broadcasting made explicit
        if not (b.ndim == 2 and list(a.shape[:-2]) == batch):
            a = bg.contiguous(bg.expand(a, batch + list(a.shape[-2:])))
            b = bg.contiguous(bg.expand(b, batch + list(b.shape[-2:])))
    y = bg.matmul(a, b)
    shape = list(y.shape)
    if b1:
        shape.pop(-1)
    if a1:
        shape.pop(-1 if b1 else -2)
    if a1 or b1:
        y = bg.reshape(y, shape)
    return y


@op("Gemm", types=F)
def _gemm(n):
    same_types(n)
    a, b = n.x(0), n.x(1)
    if int(n.attr("transA", 0)):
        a = bg.transpose(a, 0, 1)
    if int(n.attr("transB", 0)):
        b = bg.transpose(b, 0, 1)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if n.opset < 7 and int(n.attr("broadcast", 0)) == 0 and n.has(2):
        raise Skip("Gemm-6 without broadcast")
    y = bg.matmul(a, b)
    if alpha != 1.0 or (beta != 1.0 and n.has(2)):
        composed("alpha A B + beta C with scalar products (bitgrad's linear has no alpha, beta)")
    if alpha != 1.0:
        y = y * alpha
    if n.has(2):
        c = n.x(2)
        y = y + (c * beta if beta != 1.0 else c)
    return y


def _softmax(fn_name):
    def run(n):
        x = n.x(0)
        f = getattr(bg, fn_name)
        if n.opset >= 13:
            return f(x, axis_of(n.attr("axis", -1), x.ndim))
        # opsets 1-12: the input coerced to 2-d at axis, normalised over the second dimension
        axis = axis_of(n.attr("axis", 1), x.ndim)
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis:], dtype=np.int64))
        return bg.reshape(f(bg.reshape(x, [outer, inner]), 1), list(x.shape))
    return run


op("Softmax", types=F)(_softmax("softmax"))
op("LogSoftmax", types=F)(_softmax("log_softmax"))


def pad_const(x, pads, value):
    """x with pads = [begin per axis..., end per axis...] (non-negative) of `value` around it: concats."""
    r = x.ndim
    for a in range(r):
        b, e = pads[a], pads[a + r]
        if not (b or e):
            continue
        parts = []
        for k in (b, e):
            shape = list(x.shape)
            shape[a] = k
            parts.append(bg.full(shape, float(value), dtype=x.dtype) if k else None)
        x = bg.concat([p for p in (parts[0], x, parts[1]) if p is not None], a)
    return x


def _pool_geometry(n, x, kernel, explicit_pads=False):
    """(stride, pad) for bitgrad's square windows with equal strides and pads on both axes; with explicit_pads,
    (stride, [begin_h, begin_w, end_h, end_w]) for the caller to pad itself."""
    if x.ndim != 4:
        raise Skip("%d-d input (bitgrad's conv and pools are 2-d: [N, C, H, W])" % (x.ndim - 2))
    auto_pad = n.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    strides = n.ints("strides") or [1, 1]
    dil = n.ints("dilations") or [1, 1]
    if any(d != 1 for d in dil):
        raise Skip("dilations %s" % dil)
    if strides[0] != strides[1]:
        raise Skip("unequal strides %s" % strides)
    s = strides[0]
    if auto_pad in ("NOTSET", "VALID"):
        pads = n.ints("pads") or [0, 0, 0, 0]
        if auto_pad == "VALID":
            pads = [0, 0, 0, 0]
    else:  # SAME_UPPER / SAME_LOWER: the output is ceil(in / stride)
        pads = []
        for d, k in zip(x.shape[2:], kernel):
            total = max((-(-d // s) - 1) * s + k - d, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
        pads = [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]
    if explicit_pads:
        return s, pads
    if len(set(pads)) != 1:
        raise Skip("asymmetric or unequal pads %s" % pads)
    return s, pads[0]


def _pad_nchw(x, pads, value):
    return pad_const(x, [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]], value) if any(pads) else x


@op("Conv", types=F)
def _conv(n):
    same_types(n)
    x, w = n.x(0), n.x(1)
    if int(n.attr("group", 1)) != 1:
        raise Skip("group=%d (bitgrad's conv2d has no groups)" % int(n.attr("group")))
    kernel = n.ints("kernel_shape") or list(w.shape[2:])
    if list(kernel) != list(w.shape[2:]):
        raise Skip("kernel_shape %s differs from the weight's" % kernel)
    stride, pads = _pool_geometry(n, x, kernel, True)
    if len(set(pads)) == 1:
        return bg.conv2d(x, w, n.x(2) if n.has(2) else None, stride, pads[0])
    # unequal pads: the zeros written out, then bitgrad's conv2d without padding
    return bg.conv2d(_pad_nchw(x, pads, 0.0), w, n.x(2) if n.has(2) else None, stride, 0)


def _pool(fn_name):
    def run(n):
        x = n.x(0)
        if n.wants(1):
            raise Skip("the Indices output")
        kernel = n.ints("kernel_shape")
        if len(kernel) != 2 or kernel[0] != kernel[1]:
            raise Skip("kernel_shape %s (bitgrad's pools are square and 2-d)" % kernel)
        if int(n.attr("ceil_mode", 0)):
            raise Skip("ceil_mode=1")
        if int(n.attr("storage_order", 0)):
            raise Skip("storage_order=1")
        stride, pads = _pool_geometry(n, x, kernel, True)
        if any(pads):  # bitgrad's pools have no padding: written out, -inf for max, 0 where avg counts it
            if fn_name == "max_pool2d":
                x = _pad_nchw(x, pads, -math.inf)
            elif int(n.attr("count_include_pad", 0)):
                x = _pad_nchw(x, pads, 0.0)
            else:
                raise Skip("padding with count_include_pad=0 (bitgrad's avg_pool2d has no padding)")
        else:
            n.attr("count_include_pad")
        return getattr(bg, fn_name)(x, kernel[0], stride)
    return run


op("MaxPool", types=F | INTS)(exact_ints(_pool("max_pool2d")))
op("AveragePool", types=F)(_pool("avg_pool2d"))


def _global_pool(fn_name):
    def run(n):
        x = n.x(0)
        axes = list(range(2, x.ndim))
        if fn_name == "mean":
            return bg.mean(x, axes, True)
        y = x
        for a in axes:
            y = bg.max(y, a, True).values
        return y
    return run


op("GlobalAveragePool", types=F)(_global_pool("mean"))
op("GlobalMaxPool", types=F)(_global_pool("max"))


@op("LayerNormalization", types=F)
def _layer_norm(n):
    same_types(n)
    x = n.x(0)
    axis = axis_of(n.attr("axis", -1), x.ndim)
    eps = float(n.attr("epsilon", 1e-5))
    stash = int(n.attr("stash_type", 1))
    if stash != 1 or n.ty(0) != TP.FLOAT:
        if not (stash == 11 and n.ty(0) == TP.DOUBLE):
            raise Skip("stash_type %d with %s input (bitgrad normalises in the input's type)" % (stash, type_name(n.ty(0))))
    norm_shape = list(x.shape[axis:])
    d = int(np.prod(norm_shape, dtype=np.int64))
    outer = list(x.shape[:axis])
    x2 = bg.reshape(x, outer + [d])  # the normalised axes as one: the same mean and variance

    def flat(i):
        if not n.has(i):
            return None
        t = n.x(i)
        if list(t.shape) != norm_shape:
            t = bg.contiguous(bg.expand(t, norm_shape))
        return bg.reshape(t, [d])

    y = bg.reshape(bg.layer_norm(x2, flat(1), flat(2), eps), list(x.shape))
    outs = [y]
    if n.wants(1) or n.wants(2):  # Mean and InvStdDev = 1 / sqrt(mean((x - mean)^2) + eps), keepdims shape
        composed("LayerNormalization's Mean and InvStdDev outputs from mean and sqrt")
        kshape = outer + [1] * len(norm_shape)
        mean = bg.mean(x2, [x2.ndim - 1], True)
        c = x2 - mean
        inv = 1.0 / bg.sqrt(bg.mean(c * c, [x2.ndim - 1], True) + eps)
        outs += [bg.reshape(mean, kshape), bg.reshape(inv, kshape)]
    return outs


@op("Dropout", types=[F, F, BOOL])
def _dropout(n):
    x = n.x(0)
    training = n.opset >= 12 and n.has(2) and bool(n.np(2).reshape(()))
    n.attr("seed")  # it keys the random mask, which only training with a nonzero ratio draws
    n.attr("ratio")  # Dropout-7/10's ratio attribute: inference mode, where it changes nothing
    if n.opset < 7 and not int(n.attr("is_test", 0)):
        raise Skip("Dropout-6 in training mode")
    if training:
        ratio = float(n.np(1).reshape(())) if n.has(1) else 0.5
        if ratio != 0.0:
            raise Skip("training mode with ratio %g: a random mask (ONNX's data come from NumPy's generator)" % ratio)
    out = [n.vals[0]]
    if n.wants(1):  # the mask: every element kept
        mask_ty = TP.BOOL if n.opset >= 10 else n.ty(0)
        out.append(Value(bg.ones(*x.shape, dtype=STORAGE[mask_ty]), mask_ty))
    return out


def _reduction(n):
    red = n.attr("reduction", b"mean")
    return red.decode() if isinstance(red, bytes) else red


def _loss_args(n):
    """(labels as an int64 tensor, weight or None, the keyword arguments of bitgrad's loss)."""
    kw = {"reduction": _reduction(n)}
    ii = n.attr("ignore_index", None)
    if ii is not None:
        kw["ignore_index"] = int(ii)
    labels = n.x(1) if n.ty(1) == TP.INT64 else bg.tensor(n.np(1).astype(np.int64), dtype=bg.int64)
    return labels, n.x(2) if n.has(2) else None, kw


@op("NegativeLogLikelihoodLoss", types=[F, IDX, F])
def _nll(n):
    labels, weight, kw = _loss_args(n)
    return bg.nll_loss(n.x(0), labels, weight, **kw)


@op("SoftmaxCrossEntropyLoss", types=[F, IDX, F])
def _softmax_cross_entropy(n):
    labels, weight, kw = _loss_args(n)
    if n.wants(1):
        return list(bg.softmax_cross_entropy(n.x(0), labels, weight, return_log_prob=True, **kw))
    return bg.softmax_cross_entropy(n.x(0), labels, weight, **kw)


@op("Split", types=[ANY, {TP.INT64}])
def _split(n):
    x = n.x(0)
    axis = axis_of(n.attr("axis", 0), x.ndim)
    k = len(n.n_outputs)
    sizes = n.ints("split") if n.opset < 13 else ([int(v) for v in n.np(1)] if n.has(1) else None)
    if sizes is None:
        if x.shape[axis] % k:
            raise Skip("%d not divisible into %d equal parts" % (x.shape[axis], k))
        sizes = [x.shape[axis] // k] * k
    return [Value(t, n.ty(0)) for t in bg.split(x, sizes, axis)]


@op("Pad", types=[ANY, {TP.INT64}, ANY, {TP.INT64}])
def _pad(n):
    x = n.x(0)
    mode = n.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if n.opset < 11:
        pads, value = n.ints("pads"), float(n.attr("value", 0.0))
    else:
        pads = [int(v) for v in n.np(1)]
        value = float(n.np(2).reshape(())) if n.has(2) else 0.0
        if n.has(3):
            raise Skip("the axes input")
    if n.ty(0) not in F and mode == "constant" and value:
        raise Skip("a constant pad of %s" % type_name(n.ty(0)))
    return Value(bg.pad(x, pads, mode, value), n.ty(0))


def _channel(t, ndim):
    """A per-channel [C] tensor as [1, C, 1, ...] for NCHW broadcasting."""
    return bg.reshape(t, [1, t.shape[0]] + [1] * (ndim - 2))


@op("BatchNormalization", types=F)
def _batch_norm(n):
    same_types(n)
    x = n.x(0)
    if n.opset < 9:
        raise Skip("BatchNormalization before opset 9 (spatial, is_test)")
    eps = float(n.attr("epsilon", 1e-5))
    momentum = float(n.attr("momentum", 0.9))
    scale, b, mean, var = (n.x(i) for i in (1, 2, 3, 4))
    if not int(n.attr("training_mode", 0)):  # the running statistics: momentum changes nothing
        return bg.batch_norm(x, mean, var, scale, b, training=False, eps=eps)
    # Y from this batch's statistics; ONNX's running statistics: running * momentum + batch * (1 - momentum),
    # the batch variance biased (PyTorch's momentum is the other way round and its running variance unbiased,
    # so they are computed here from bitgrad's mean and var rather than by batch_norm's in-place update)
    y = bg.batch_norm(x, None, None, scale, b, training=True, eps=eps)
    composed("training mode's running statistics (ONNX's momentum convention) from mean and var")
    axes = [0] + list(range(2, x.ndim))
    batch_mean, batch_var = bg.mean(x, axes), bg.var(x, axes, correction=0.0)
    return [y, mean * momentum + batch_mean * (1.0 - momentum), var * momentum + batch_var * (1.0 - momentum)]


@op("InstanceNormalization", types=F)
def _instance_norm(n):
    same_types(n)
    return bound("instance_norm")(n.x(0), n.x(1), n.x(2), float(n.attr("epsilon", 1e-5)))


@op("MeanVarianceNormalization", types=F)
def _mvn(n):
    x = n.x(0)
    axes = sorted(axis_of(a, x.ndim) for a in (n.ints("axes") or [0, 2, 3]))
    # ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
    composed("MVN's function body (no op)")
    mean = bg.mean(x, axes, True)
    var = bg.mean(x * x, axes, True) - mean * mean
    return (x - mean) / (bg.sqrt(var) + 1e-9)


@op("Range", types=F | {TP.INT64, TP.INT32, TP.INT16})
def _range(n):
    start, limit, delta = (n.np(i).reshape(()) for i in range(3))
    if n.ty(0) in INTS:
        start, limit, delta = int(start), int(limit), int(delta)
        if max(abs(start), abs(limit)) >= EXACT:
            raise Skip("integers beyond 2^53")
    dt = bg.float32 if n.ty(0) == TP.FLOAT else bg.float64
    y = bg.arange(float(start), float(limit), float(delta), dtype=dt)  # ONNX Range: start + i delta
    return Value(y, n.ty(0)) if n.ty(0) in F else from_f64(y, n.ty(0))


@op("Compress", types=[ANY, BOOL])
def _compress(n):
    x = n.x(0)
    axis = n.attr("axis", None)
    if axis is None:  # the flattened input
        x, axis = bg.reshape(x, [x.numel()]), 0
    axis = axis_of(axis, x.ndim)
    cond = n.np(1).reshape(-1)[:x.shape[axis]]
    idx = np.nonzero(cond)[0].astype(np.int64)  # the selected positions (the condition is an index input)
    return Value(bg.index_select(x, axis, bg.tensor(idx, dtype=bg.int64)), n.ty(0))


@op("DequantizeLinear", types=[{TP.INT8, TP.UINT8, TP.INT32}, F, {TP.INT8, TP.UINT8, TP.INT32}])
def _dequantize_linear(n):
    x = n.x(0)
    if n.ty(0) == TP.INT32 and x.numel() and np.abs(n.np(0).astype(np.float64)).max() >= 2**24:
        raise Skip("int32 values beyond 2^24: not exact in float32")
    scale = n.x(1)
    axis = axis_of(n.attr("axis", 1), x.ndim) if scale.ndim else None

    def per_axis(t):  # a scalar, or one value per position of axis
        return t if t.ndim == 0 else bg.reshape(t, [t.shape[0] if i == axis else 1 for i in range(x.ndim)])

    composed("(x - zero point) * scale (no quantized dtypes)")
    xf = x.to(scale.dtype)
    if n.has(2):
        xf = xf - per_axis(n.x(2).to(scale.dtype))  # integers below 2^24: exact
    return Value(xf * per_axis(scale), n.ty(1))


@op("LRN", types=F)
def _lrn(n):
    x = n.x(0)
    size = int(n.attr("size"))
    alpha, beta, bias = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75)), float(n.attr("bias", 1.0))
    composed("LRN's window sums and power (no op)")
    # square_sum[c] = sum of x^2 over c - floor((size-1)/2) .. c + ceil((size-1)/2), zero beyond the channels
    sq = x * x
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = pad_const(sq, [0, lo] + [0] * (x.ndim - 2) + [0, hi] + [0] * (x.ndim - 2), 0.0)
    C = x.shape[1]
    total = bg.slice(padded, 1, 0, C)
    for k in range(1, size):
        total = total + bg.slice(padded, 1, k, k + C)
    return x / bg.pow(total * (alpha / size) + bias, beta)


# ---- recurrent layers: ONNX's equations, one time step after the other -----------------------------
def _recurrent(kind):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    defaults = {"RNN": [b"Tanh"], "GRU": [b"Sigmoid", b"Tanh"], "LSTM": [b"Sigmoid", b"Tanh", b"Tanh"]}[kind]

    def run(n):
        if len({v.ty for i, v in enumerate(n.vals) if v is not None and i != 4}) > 1:
            raise Skip("inputs of different float types")
        X, W, R = n.x(0), n.x(1), n.x(2)
        composed("ONNX's %s equations step by step (bitgrad's cells take PyTorch's gate order)" % kind)
        hidden = int(n.attr("hidden_size"))
        direction = n.attr("direction", b"forward")
        if direction not in (b"forward", "forward"):
            raise Skip("direction %s" % (direction.decode() if isinstance(direction, bytes) else direction))
        acts = n.attr("activations", None)
        if acts is not None and [a if isinstance(a, bytes) else a.encode() for a in acts] != defaults:
            raise Skip("activations %s" % acts)
        for name in ("activation_alpha", "activation_beta", "clip"):
            if n.attr(name) is not None:
                raise Skip("attribute %s" % name)
        if int(n.attr("linear_before_reset", 0)) or int(n.attr("input_forget", 0)):
            raise Skip("linear_before_reset / input_forget")
        layout = int(n.attr("layout", 0))
        if layout:  # [batch, seq, input] -> [seq, batch, input]
            X = bg.transpose(X, 0, 1)
        T, N = X.shape[0], X.shape[1]
        if n.has(4):
            lens = n.np(4)
            if (lens != T).any():
                raise Skip("sequence_lens shorter than the sequence")
        W0, R0 = bg.reshape(W, list(W.shape[1:])), bg.reshape(R, list(R.shape[1:]))
        if n.has(3):
            B = bg.reshape(n.x(3), [2 * gates * hidden])
            bias = bg.slice(B, 0, 0, gates * hidden) + bg.slice(B, 0, gates * hidden, 2 * gates * hidden)
            wb, rb = bg.slice(B, 0, 0, gates * hidden), bg.slice(B, 0, gates * hidden, 2 * gates * hidden)
        else:
            bias = wb = rb = None
        h = bg.reshape(n.x(5), [N, hidden]) if n.has(5) else bg.zeros(N, hidden, dtype=X.dtype)
        c = bg.reshape(n.x(6), [N, hidden]) if kind == "LSTM" and n.has(6) else bg.zeros(N, hidden, dtype=X.dtype)
        P = bg.reshape(n.x(7), [3 * hidden]) if kind == "LSTM" and n.has(7) else None

        def g(t, k):  # gate k of a [N, gates * hidden] tensor
            return bg.slice(t, 1, k * hidden, (k + 1) * hidden)

        def p(k):
            return bg.slice(P, 0, k * hidden, (k + 1) * hidden)

        ys = []
        for t in range(T):
            xt = bg.reshape(bg.slice(X, 0, t, t + 1), [N, X.shape[2]])
            xw = bg.linear(xt, W0)
            if kind == "RNN":  # Ht = tanh(Xt W^T + Ht-1 R^T + Wb + Rb)
                a = xw + bg.linear(h, R0)
                h = bg.tanh(a + bias if bias is not None else a)
            elif kind == "GRU":  # gates z, r, h; linear_before_reset = 0
                hr = bg.linear(h, bg.slice(R0, 0, 0, 2 * hidden))
                zr = g(xw, 0), g(xw, 1)
                z = zr[0] + g(hr, 0)
                r = zr[1] + g(hr, 1)
                if bias is not None:
                    z, r = z + g(bg.reshape(bias, [1, 3 * hidden]), 0), r + g(bg.reshape(bias, [1, 3 * hidden]), 1)
                z, r = bg.sigmoid(z), bg.sigmoid(r)
                hh = g(xw, 2) + bg.linear(r * h, bg.slice(R0, 0, 2 * hidden, 3 * hidden))
                if bias is not None:
                    hh = hh + g(bg.reshape(rb, [1, 3 * hidden]), 2) + g(bg.reshape(wb, [1, 3 * hidden]), 2)
                hh = bg.tanh(hh)
                h = (1.0 - z) * hh + z * h
            else:  # LSTM: gates i, o, f, c; peepholes i, o, f
                a = xw + bg.linear(h, R0)
                if bias is not None:
                    a = a + bias
                i, o, f, cc = g(a, 0), g(a, 1), g(a, 2), g(a, 3)
                if P is not None:
                    i, f = i + p(0) * c, f + p(2) * c
                i, f, cc = bg.sigmoid(i), bg.sigmoid(f), bg.tanh(cc)
                c = f * c + i * cc
                if P is not None:
                    o = o + p(1) * c
                h = bg.sigmoid(o) * bg.tanh(c)
            ys.append(h)
        Y = bg.reshape(bg.concat(ys, 0), [T, 1, N, hidden])
        Yh, Yc = bg.reshape(h, [1, N, hidden]), bg.reshape(c, [1, N, hidden])
        if layout:  # Y [batch, seq, dirs, hidden], Y_h [batch, dirs, hidden]
            Y = bg.contiguous(bg.permute(Y, [2, 0, 1, 3]))
            Yh, Yc = bg.contiguous(bg.transpose(Yh, 0, 1)), bg.contiguous(bg.transpose(Yc, 0, 1))
        return [Y, Yh, Yc][:len(n.n_outputs)]
    return run


for _kind in ("RNN", "GRU", "LSTM"):
    op(_kind, types=[F, F, F, F, IDX, F, F, F])(_recurrent(_kind))


# ---- shape and index ops (bitgrad.tril, one_hot, scatter, topk, einsum ...) ----------------
def _str(v):
    return v.decode() if isinstance(v, bytes) else v


@op("Trilu", types=[F | INTS, {TP.INT64}])
def _trilu(n):
    f = bound("triu" if int(n.attr("upper", 1)) else "tril")
    k = int(n.np(1).reshape(())) if n.has(1) else 0
    if n.ty(0) in INTS:  # the values through float64, exactly
        return from_f64(f(to_f64(n.vals[0]), k), n.ty(0))
    return f(n.x(0), k)


@op("OneHot", types=[F | IDX, F | IDX, F | INTS])
def _one_hot(n):
    f = bound("one_hot")
    idx = n.np(0)
    if n.ty(0) in F:  # ONNX casts float indices to integers (they hold integers in the test data)
        if not (idx == np.trunc(idx)).all():
            raise Skip("non-integral float indices")
    depth = n.np(1).reshape(())
    if depth != np.trunc(depth):
        raise Skip("a non-integral depth")
    off, on = (float(v) for v in n.np(2).reshape(2))
    vty = n.ty(2)
    if vty in INTS and max(abs(off), abs(on)) >= EXACT:
        raise Skip("values beyond 2^53")
    y = f(bg.tensor(idx.astype(np.int64), dtype=bg.int64), int(depth), axis=int(n.attr("axis", -1)), off=off, on=on,
          dtype=STORAGE[vty] if vty in F else bg.float64)
    return Value(y if vty in F else y.to(STORAGE[vty]), vty)


@op("EyeLike", types=NUMERIC)
def _eye_like(n):
    f = bound("eye_like")
    x = n.x(0)
    ty = int(n.attr("dtype", n.ty(0)))
    if ty not in STORAGE or ty in (TP.FLOAT16, TP.BFLOAT16):
        raise Skip("dtype %s" % type_name(ty))
    return Value(f(x, int(n.attr("k", 0)), dtype=STORAGE[ty]), ty)


def _scatter_elements(n):
    f = bound("scatter")
    x = n.x(0)
    axis = axis_of(n.attr("axis", 0), x.ndim)
    red = _str(n.attr("reduction", "none"))
    if red not in ("none", "add"):
        raise Skip("reduction %s" % red)
    idx = _indices(n, 1, x.shape[axis])
    return f(x, axis, bg.tensor(idx, dtype=bg.int64), n.x(2), red)


op("ScatterElements", types=[F, IDX, F])(_scatter_elements)
op("Scatter", types=[F, IDX, F])(_scatter_elements)


@op("ScatterND", types=[F, {TP.INT64}, F])
def _scatter_nd(n):
    f = bound("scatter_nd")
    red = _str(n.attr("reduction", "none"))
    if red not in ("none", "add"):
        raise Skip("reduction %s" % red)
    return f(n.x(0), n.x(1), n.x(2), red)


@op("GatherND", types=[F | INTS, {TP.INT64}])
def _gather_nd(n):
    f = bound("gather_nd")
    bd = int(n.attr("batch_dims", 0))
    if n.ty(0) in INTS:  # the values through float64, exactly
        return from_f64(f(to_f64(n.vals[0]), n.x(1), bd), n.ty(0))
    return f(n.x(0), n.x(1), bd)


@op("TopK", types=[F, {TP.INT64}])
def _top_k(n):
    f = bound("topk")
    x = n.x(0)
    k = int(n.np(1).reshape(-1)[0])
    if n.opset < 10:
        raise Skip("TopK-1 (k as an attribute)")
    values, indices = f(x, k, axis_of(n.attr("axis", -1), x.ndim), bool(n.attr("largest", 1)), bool(n.attr("sorted", 1)))
    return [values, Value(indices, TP.INT64)]


@op("Einsum", types=F)
def _einsum(n):
    f = bound("einsum")
    same_types(n)
    eq = _str(n.attr("equation")).replace(" ", "")
    for term in eq.split("->")[0].split(","):
        letters = term.replace("...", "")
        if len(set(letters)) != len(letters):
            raise Skip("an index repeated within an operand (a diagonal): bitgrad's einsum contracts by GEMM")
    return f(eq, *[n.x(i) for i in range(len(n.vals))])


@op("CumSum", types=[F | INTS, IDX])
def _cumsum(n):
    f = bound("cumsum")
    axis = axis_of(int(n.np(1).reshape(())), n.x(0).ndim)
    kw = {"exclusive": bool(n.attr("exclusive", 0)), "reverse": bool(n.attr("reverse", 0))}
    if n.ty(0) in INTS:  # sums of integers below 2^53 through float64, exactly
        return from_f64(f(to_f64(n.vals[0]), axis, **kw), n.ty(0))
    return f(n.x(0), axis, **kw)


@op("Hardmax", types=F)
def _hardmax(n):  # 1 at the first maximum along axis, 0 elsewhere: one_hot of argmax
    x = n.x(0)
    composed("one_hot of argmax (no hardmax op)")
    if n.opset >= 13:
        axis = axis_of(n.attr("axis", -1), x.ndim)
        return bg.one_hot(bg.argmax(x, axis), x.shape[axis], axis=axis, dtype=x.dtype)
    # opsets 1-12: the input coerced to 2-d at axis
    axis = axis_of(n.attr("axis", 1), x.ndim)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))
    y = bg.one_hot(bg.argmax(bg.reshape(x, [outer, inner]), 1), inner, axis=1, dtype=x.dtype)
    return bg.reshape(y, list(x.shape))


# ---- comparisons and masks (bitgrad's eq, lt, logical_and ... giving uint8 masks) -------------------------
def first_bound(*names):
    """The first of bitgrad.<names> the module has, or a Skip naming them."""
    for name in names:
        f = getattr(bg, name, None)
        if f is not None:
            return f
    raise Skip("bitgrad has no %s op" % " / ".join(names))


def _compare(*names):
    def run(n):
        f = first_bound(*names)
        same_types(n)
        xs = [to_f64(v) if v.ty in INTS else n.x(i) for i, v in enumerate(n.vals)]  # integers: exact in float64
        return Value(f(*xs), TP.BOOL)
    return run


op("Equal", types=F | INTS)(_compare("eq", "equal"))
op("Less", types=F | INTS)(_compare("lt", "less"))
op("LessOrEqual", types=F | INTS)(_compare("le", "less_equal"))
op("Greater", types=F | INTS)(_compare("gt", "greater"))
op("GreaterOrEqual", types=F | INTS)(_compare("ge", "greater_equal"))


def _logical(*names):
    return lambda n: Value(first_bound(*names)(*[n.x(i) for i in range(len(n.vals))]), TP.BOOL)


op("Not", types=BOOL)(_logical("logical_not"))
op("And", types=BOOL)(_logical("logical_and"))
op("Or", types=BOOL)(_logical("logical_or"))
op("Xor", types=BOOL)(_logical("logical_xor"))
op("IsNaN", types=F)(lambda n: Value(first_bound("isnan")(n.x(0)), TP.BOOL))


@op("IsInf", types=F)
def _isinf(n):
    pos, neg = bool(n.attr("detect_positive", 1)), bool(n.attr("detect_negative", 1))
    return Value(first_bound("isinf")(n.x(0), detect_positive=pos, detect_negative=neg), TP.BOOL)


# ---- activations with parameters (ONNX's attributes are bitgrad's arguments, with the same defaults) ------
def _activation(fn_name, **defaults):
    def run(n):
        f = bound(fn_name)
        return f(n.x(0), **{k: float(n.attr(k, v)) for k, v in defaults.items()})
    return run


op("LeakyRelu", types=F)(_activation("leaky_relu", alpha=0.01))
op("Elu", types=F)(_activation("elu", alpha=1.0))
op("Selu", types=F)(_activation("selu", alpha=1.67326319217681884765625, gamma=1.05070102214813232421875))
op("Celu", types=F)(_activation("celu", alpha=1.0))
op("ThresholdedRelu", types=F)(_activation("thresholded_relu", alpha=1.0))


@op("PRelu", types=F)
def _prelu(n):
    same_types(n)
    return bound("prelu")(n.x(0), n.x(1))


@op("Shrink", types=F)
def _shrink(n):  # x - bias above lambd, x + bias below -lambd, 0 between: ONNX's definition
    x = n.x(0)
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    composed("where / comparisons (no shrink op)")
    zero = bg.scalar(0.0, dtype=x.dtype)
    return bg.where(bound("gt")(x, lambd), x - bias, bg.where(bound("lt")(x, -lambd), x + bias, zero))
