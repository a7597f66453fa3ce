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
//   cost    simple (one IEEE operation) or math (an elementary function in f64): the fast path's grain
//   lo, hi  the range of the op tests' inputs (gradient check, determinism, PyTorch parity)
//   method  1: Python's Tensor has a method of the name too
//   torch   the PyTorch oracle of tests/python/test_parity_ops.py ("": none, a hand-written case)
//   doc     the Python docstring
#define BITGRAD_UNARY_OPS(X)                                                                              \
  X(neg, custom, simple, -1, 1, 0, "torch.neg", "-x.")                                                    \
  X(abs, kernel, simple, -1, 1, 0, "", "|x|.")                                                            \
  X(exp, custom, math, -3, 3, 1, "torch.exp", "e^x (bitgrad's own exp, numerics.md).")                    \
  X(expm1, kernel, math, -3, 3, 0, "", "e^x - 1.")                                                        \
  X(log, custom, math, 0.2, 5, 1, "torch.log", "Natural logarithm.")                                      \
  X(log1p, kernel, math, -0.5, 5, 0, "", "log(1 + x).")                                                   \
  X(sqrt, custom, simple, 0.2, 5, 1, "torch.sqrt", "Square root.")                                        \
  X(rsqrt, kernel, math, 0.2, 5, 0, "", "1 / sqrt(x).")                                                   \
  X(tanh, act_y, math, -3, 3, 1, "torch.tanh", "Hyperbolic tangent.")                                     \
  X(sigmoid, act_y, math, -4, 4, 1, "torch.sigmoid", "1 / (1 + e^-x).")                                   \
  X(erf, kernel, math, -3, 3, 0, "", "The error function.")                                               \
  X(sin, kernel, math, -3, 3, 0, "", "Sine.")                                                             \
  X(cos, kernel, math, -3, 3, 0, "", "Cosine.")                                                           \
  X(relu, act_x, simple, -1, 1, 1, "torch.relu", "max(x, 0).")                                            \
  X(gelu, custom, math, -4, 4, 1, "torch.nn.functional.gelu", "Exact (erf) GELU.")                        \
  X(square, kernel, simple, -2, 2, 0, "", "x * x.")                                                       \
  X(reciprocal, kernel, simple, 0.2, 5, 0, "", "1 / x.")                                                 \
  X(softplus, act_x, math, -5, 5, 0, "torch.nn.functional.softplus", "log(1 + e^x); x itself beyond 20.")

// ---- gradients of activations: X(name, cost) --------------------------------------------------------
// out = g * f'(v), v the input x or the output y as the unary line's grad says (numerics.md §7)
#define BITGRAD_ACT_GRADS(X) \
  X(relu, simple)            \
  X(gelu, math)              \
  X(tanh, simple)            \
  X(sigmoid, simple)         \
  X(softplus, math)

// ---- binary ops: X(name, scalar, doc) ---------------------------------------------------------------
//   scalar  1: also an op with a number as b (bitgrad::name(Tensor, double), Python name(a, 2.5))
// Their backwards differ too much to share (src/ops/elementwise.cpp, binary_op).
#define BITGRAD_BINARY_OPS(X)                                                         \
  X(add, 1, "a + b, broadcasting as NumPy does.")                                     \
  X(sub, 1, "a - b.")                                                                 \
  X(mul, 1, "a * b.")                                                                 \
  X(div, 1, "a / b.")                                                                 \
  X(pow, 1, "a ** b.")                                                                \
  X(maximum, 0, "Elementwise maximum (NaN-propagating; ties split the gradient).")    \
  X(minimum, 0, "Elementwise minimum.")

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
#define BITGRAD_OPLIST_IF_ACT(grad) BITGRAD_OPLIST_IF_ACT_##grad
#define BITGRAD_OPLIST_IF_ACT_kernel BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ACT_custom BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_ACT_act_x BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF_ACT_act_y BITGRAD_OPLIST_KEEP
#define BITGRAD_OPLIST_IF(flag) BITGRAD_OPLIST_IF_##flag
#define BITGRAD_OPLIST_IF_0 BITGRAD_OPLIST_DROP
#define BITGRAD_OPLIST_IF_1 BITGRAD_OPLIST_KEEP
