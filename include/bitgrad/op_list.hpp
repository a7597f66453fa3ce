// The elementwise op families, one line per op (X-macros). Everything that names these ops is
// generated from here: the kernel enums kern::Unary / Binary / ActGrad (each ending in `count`)
// and their name tables (src/kernels/kernels.hpp), the declarations in bitgrad/ops.hpp, the
// op functions of the activations (src/ops/elementwise.cpp), the Python functions and methods
// (src/python/ops.cpp, tensor.cpp), and the test loops (kernel tests, NaN payloads, the op
// harness's gradient and determinism cases, the PyTorch parity cases). Adding an op: a line here,
// its case in the reference and fast kernels, its .pyi line and its numerics (docs/architecture.md,
// "Adding an op"). Appending a line without the rest fails the build (the kernels' switches are
// errors under -Werror=switch, a missing op function does not link) or a test.
//
// The order of the lines is the order of the enums; nothing persists an enum's value.
#pragma once

// ---- unary ops: X(name, grad, cost, lo, hi, method, torch, doc) ------------------------------------
//   name    kern::Unary::name, the C++ op bitgrad::name (unless grad is `kernel`), Python bitgrad.name
//   grad    kernel: a kernel only, used inside other ops (no op of its own)
//           custom: an op whose backward is written by hand in src/ops/elementwise.cpp
//           act_x:  backward act_grad(ActGrad::name, x, g) (an ActGrad line of the same name)
//           act_y:  backward act_grad(ActGrad::name, y, g)
//           zero:   an op whose gradient is +0 everywhere (piecewise constant: sign, floor, ...)
//   cost    simple (one IEEE operation) or math (an elementary function in f64): the fast path's grain
//   lo, hi  the range of the op tests' inputs (gradient check, determinism, PyTorch parity)
//   method  1: Python's Tensor has a method of the name too
//   torch   the PyTorch oracle of tests/python/test_parity_ops.py ("": none, a hand-written case)
//   doc     the Python docstring
#define BITGRAD_UNARY_OPS(X)                                                                              \
  X(neg, custom, simple, -1, 1, 0, "torch.neg", "-x.")                                                    \
  X(abs, act_x, simple, -1, 1, 1, "torch.abs", "|x|; gradient sign(x) g, +0 at x = 0.")                    \
  X(exp, custom, math, -3, 3, 1, "torch.exp", "e^x (bitgrad's own exp, numerics.md).")                    \
  X(expm1, kernel, math, -3, 3, 0, "", "e^x - 1.")                                                        \
  X(log, custom, math, 0.2, 5, 1, "torch.log", "Natural logarithm.")                                      \
  X(log1p, kernel, math, -0.5, 5, 0, "", "log(1 + x).")                                                   \
  X(sqrt, custom, simple, 0.2, 5, 1, "torch.sqrt", "Square root.")                                        \
  X(rsqrt, kernel, math, 0.2, 5, 0, "", "1 / sqrt(x).")                                                   \
  X(tanh, act_y, math, -3, 3, 1, "torch.tanh", "Hyperbolic tangent.")                                     \
  X(sigmoid, act_y, math, -4, 4, 1, "torch.sigmoid", "1 / (1 + e^-x).")                                   \
  X(erf, act_x, math, -3, 3, 1, "torch.erf", "The error function.")                                      \
  X(sin, act_x, math, -3, 3, 1, "torch.sin", "Sine (bitgrad's own, numerics.md).")                         \
  X(cos, act_x, math, -3, 3, 1, "torch.cos", "Cosine (bitgrad's own, numerics.md).")                       \
  X(relu, act_x, simple, -1, 1, 1, "torch.relu", "max(x, 0).")                                            \
  X(gelu, custom, math, -4, 4, 1, "torch.nn.functional.gelu", "Exact (erf) GELU.")                        \
  X(square, kernel, simple, -2, 2, 0, "", "x * x.")                                                       \
  X(reciprocal, act_y, simple, 0.2, 5, 1, "torch.reciprocal", "1 / x.")                                  \
  X(softplus, act_x, math, -5, 5, 0, "torch.nn.functional.softplus", "log(1 + e^x); x itself beyond 20.") \
  /* more elementwise ops (numerics.md §32)          */                                                      \
  X(sign, zero, simple, -1, 1, 1, "torch.sign", "1 where x > 0, -1 where x < 0, x itself at +-0 and NaN.")   \
  X(tan, act_y, math, -1.2, 1.2, 1, "torch.tan", "Tangent (bitgrad's own, numerics.md).")                  \
  X(floor, zero, simple, -3, 3, 1, "torch.floor", "The largest integer <= x.")                               \
  X(ceil, zero, simple, -3, 3, 1, "torch.ceil", "The smallest integer >= x.")                                \
  X(round, zero, simple, -3, 3, 1, "torch.round", "The nearest integer, halves to even.")                    \
  X(softsign, act_x, simple, -3, 3, 0, "torch.nn.functional.softsign", "x / (1 + |x|).")                     \
  X(silu, act_x, math, -5, 5, 0, "torch.nn.functional.silu", "x sigmoid(x) (swish).")                        \
  X(mish, act_x, math, -5, 5, 0, "torch.nn.functional.mish", "x tanh(softplus(x)).")                         \
  X(hardswish, act_x, simple, -5, 5, 0, "torch.nn.functional.hardswish", "x min(max(x + 3, 0), 6) / 6.")

// ---- gradients of activations: X(name, cost) --------------------------------------------------------
// out = g * f'(v), v the input x or the output y as the unary line's grad says (numerics.md §7)
#define BITGRAD_ACT_GRADS(X) \
  X(relu, simple)            \
  X(gelu, math)              \
  X(tanh, simple)            \
  X(sigmoid, simple)         \
  X(softplus, math)          \
  X(abs, simple)             \
  X(erf, math)               \
  X(sin, math)               \
  X(cos, math)               \
  X(reciprocal, simple)      \
  X(tan, simple)             \
  X(softsign, simple)        \
  X(silu, math)              \
  X(mish, math)              \
  X(hardswish, simple)

// ---- binary ops: X(name, scalar, doc) ---------------------------------------------------------------
//   scalar  1: also an op with a number as b (bitgrad::name(Tensor, double), Python name(a, 2.5))
// Their backwards differ too much to share (src/ops/elementwise.cpp, binary_op).
#define BITGRAD_BINARY_OPS(X)                                                         \
  X(add, 1, "a + b, broadcasting as NumPy does.")                                     \
  X(sub, 1, "a - b.")                                                                 \
  X(mul, 1, "a * b.")                                                                 \
  X(div, 1, "a / b.")                                                                 \
  X(pow, 1, "a ** b.")                                                                \
  X(maximum, 1, "Elementwise maximum (NaN-propagating; ties split the gradient).")    \
  X(minimum, 1, "Elementwise minimum.")

// ---- activations with parameters: X(name, cost, nparams, a, da, b, db, lo, hi, torch, doc) ------------
//   name     kern::UnaryP::name, the C++ op bitgrad::name(x, a[, b]), Python bitgrad.name(x, a=..[, b=..])
//   cost     as for the unary lines
//   nparams  1 or 2: the op takes a (and b); a line with 1 writes `_, 0` for b
//   a, da    the first parameter's name (C++ and Python keyword) and default; b, db the second's
//   lo, hi   the op tests' input range (the tests run at the defaults)
//   torch    the PyTorch oracle of tests/python/test_parity_ops.py, a Python expression in x, a, b
//   doc      the Python docstring
// The backward is act_grad_p on the saved x with the same parameters (src/ops/activation.cpp).
#define BITGRAD_PARAM_OPS(X)                                                                                   \
  X(leaky_relu, simple, 1, alpha, 0.01, _, 0, -1, 1, "torch.nn.functional.leaky_relu(x, a)",                   \
    "x where x > 0, else alpha x.")                                                                            \
  X(elu, math, 1, alpha, 1.0, _, 0, -3, 3, "torch.nn.functional.elu(x, a)", "x where x > 0, else alpha (e^x - 1).") \
  X(selu, math, 2, alpha, 1.67326319217681884765625, gamma, 1.05070102214813232421875, -3, 3,                   \
    "b * torch.nn.functional.elu(x, a)",                                                                       \
    "gamma x where x > 0, else gamma alpha (e^x - 1); ONNX's defaults (PyTorch's constants rounded to f32).")   \
  X(celu, math, 1, alpha, 1.0, _, 0, -3, 3, "torch.nn.functional.celu(x, a)",                                  \
    "max(0, x) + min(0, alpha (e^(x/alpha) - 1)).")                                                            \
  X(hardsigmoid, simple, 2, alpha, 0.2, beta, 0.5, -4, 4, "torch.clamp(x * a + b, 0.0, 1.0)",                  \
    "max(0, min(1, alpha x + beta)); ONNX's defaults (PyTorch's hardsigmoid is alpha = 1/6).")                 \
  X(thresholded_relu, simple, 1, alpha, 1.0, _, 0, -3, 3, "torch.nn.functional.threshold(x, a, 0.0)",          \
    "x where x > alpha, else 0.")

// The parameters of a BITGRAD_PARAM_OPS line as a declaration (with defaults), a definition, arguments
#define BITGRAD_OPLIST_PARAMS_DECL(n, a, da, b, db) BITGRAD_OPLIST_PARAMS_DECL_##n(a, da, b, db)
#define BITGRAD_OPLIST_PARAMS_DECL_1(a, da, b, db) double a = da
#define BITGRAD_OPLIST_PARAMS_DECL_2(a, da, b, db) double a = da, double b = db
#define BITGRAD_OPLIST_PARAMS_DEF(n, a, b) BITGRAD_OPLIST_PARAMS_DEF_##n(a, b)
#define BITGRAD_OPLIST_PARAMS_DEF_1(a, b) double a
#define BITGRAD_OPLIST_PARAMS_DEF_2(a, b) double a, double b
#define BITGRAD_OPLIST_PARAMS_ARGS(n, a, b) BITGRAD_OPLIST_PARAMS_ARGS_##n(a, b)
#define BITGRAD_OPLIST_PARAMS_ARGS_1(a, b) a, 0.0
#define BITGRAD_OPLIST_PARAMS_ARGS_2(a, b) a, b

// ---- comparisons: X(name, op, doc) ----------------------------------------------------------------------
// u8 masks (1 true, 0 false) of a op b, broadcasting, or of a op number; no gradient (src/ops/compare.cpp)
#define BITGRAD_COMPARE_OPS(X)                                \
  X(eq, ==, "a == b as a u8 mask (NaN equals nothing).")     \
  X(ne, !=, "a != b as a u8 mask (true where either is NaN).") \
  X(lt, <, "a < b as a u8 mask.")                            \
  X(le, <=, "a <= b as a u8 mask.")                          \
  X(gt, >, "a > b as a u8 mask.")                            \
  X(ge, >=, "a >= b as a u8 mask.")

// Dispatch on a field's value: BITGRAD_OPLIST_IF_OP(grad)(tokens) keeps the tokens for lines
// that are ops (grad other than `kernel`), BITGRAD_OPLIST_IF_ACT(grad) for act_x / act_y lines,
// BITGRAD_OPLIST_IF(flag) where a 0/1 field is 1.
#define BITGRAD_OPLIST_KEEP(...) __VA_ARGS__
#define BITGRAD_OPLIST_DROP(...)
#define BITGRAD_OPLIST_IF_OP(grad) BITGRAD_OPLIST_IF_OP_##grad
#define BITGRAD_OPLIST_IF_OP_kernel BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_OP_custom BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_OP_act_x BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_OP_act_y BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_OP_zero BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_ACT(grad) BITGRAD_OPLIST_IF_ACT_##grad
#define BITGRAD_OPLIST_IF_ACT_kernel BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ACT_custom BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ACT_act_x BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_ACT_act_y BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_ACT_zero BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ZERO(grad) BITGRAD_OPLIST_IF_ZERO_##grad
#define BITGRAD_OPLIST_IF_ZERO_kernel BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ZERO_custom BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ZERO_act_x BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ZERO_act_y BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ZERO_zero BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF(flag) BITGRAD_OPLIST_IF_##flag
#define BITGRAD_OPLIST_IF_0 BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_1 BITGRAD_OPLIST_KEEP
