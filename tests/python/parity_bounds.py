"""Bounds for comparing bitgrad with another implementation (torch, numpy), derived, not fitted.

torch's float32 results move with the CPU (its kernels pick AVX2 / AVX-512 paths, blocking and
accumulator types per machine); bitgrad's do not (contract T8), and a float64 reference computed
from the same float32 values is the exact value to ~1e-16, far below float32's 6e-8. So the
float32 checks compare both libraries with that reference; only torch's side moves between CPUs.

Notation (Higham, Accuracy and Stability of Numerical Algorithms, §2-3): u is the unit roundoff,
u = 2^-24 (float32), 2^-53 (float64); gamma(n) = n u / (1 - n u) bounds the relative error of n
roundings; a sum or dot product of n terms, in any order, is within gamma(n - 1) * sum|terms| of
the exact value (inner products with FMA: the same bound).
"""
import math

import numpy as np

U32 = 2.0 ** -24
U64 = 2.0 ** -53

# bitgrad's float32 error may reach K_TORCH times torch's own error on the same data. Both evaluate
# the same formula with rounding errors of the same size (u of the value rounded) but in other
# orders; a factor of 4 (2 bits) covers orders whose error constants differ by that much, while a
# wrong result (errors of the size of the values, >= 2^20 u) cannot hide under it.
K_TORCH = 4


def gamma(n, u):
    assert n * u < 0.5, "gamma(%d) is no bound in this precision" % n
    return n * u / (1 - n * u)


def gamma_prob(n, u, lam=8.0):
    """Higham & Mary's probabilistic bound (SIAM J. Sci. Comput. 41(5), 2019, Thm 2.4 / 3.1): with
    rounding errors independent and of mean zero, n roundings stay within exp(lam sqrt(n) u +
    n u^2 / (1 - u)) - 1 of the terms' magnitude with probability >= 1 - 2 n exp(-lam^2 (1 - u)^2 / 2);
    lam = 8: that failure probability is below 1e-9 for n up to 3.5e4. Used for deep compositions,
    where gamma(n) with n in the tens of thousands is too wide to catch a wrong constant."""
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


def scale(a):
    """the largest magnitude of a (1 when a is empty or all zero)"""
    a = np.asarray(a, dtype=np.float64)
    s = float(np.max(np.abs(a))) if a.size else 0.0
    return s if s > 0 else 1.0


def max_err(a, ref):
    a, ref = np.asarray(a, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(a - ref))) if a.size else 0.0


def check_vs_reference(what, got, theirs, ref, floor, k=K_TORCH):
    """bitgrad's result `got` and the other implementation's `theirs` (both float32) against the
    float64 reference `ref`: max|got - ref| <= max(floor, k * max|theirs - ref|). `floor` is the
    caller's a priori bound on a float32 evaluation's error; k * torch's error covers the data where
    that bound's assumptions (terms no larger than the result) do not hold, as torch's error grows
    with the same cancellation."""
    got, theirs, ref = (np.asarray(x, dtype=np.float64) for x in (got, theirs, ref))
    assert got.shape == ref.shape == theirs.shape, "%s: shapes %s, %s, reference %s" % (what, got.shape, theirs.shape, ref.shape)
    assert np.isfinite(ref).all(), "%s: the reference is not finite" % what
    e_bg, e_th = max_err(got, ref), max_err(theirs, ref)
    bound = max(floor, k * e_th)
    assert e_bg <= bound, ("%s: bitgrad's error %.3g > bound %.3g (floor %.3g, torch's error %.3g x %g; scale %.3g)"
                           % (what, e_bg, bound, floor, e_th, k, scale(ref)))
    return e_bg, e_th


def path_roundings(model, seq=1):
    """An upper bound on the roundings on the path to one output of a torch module, for
    gamma_prob: each convolution or linear layer sums (inputs per group) * kernel terms; attention
    adds its input projection (embed_dim), the scores (head_dim), the softmax's sum and the weighted
    sum over `seq` positions; an LSTM adds its gates (input + hidden) on each of `seq` steps, since
    the recurrence carries every step's error on; every layer adds 16 for its elementwise roundings
    (batch or layer norm, activations, the residual adds, pooling). The layers run one after
    another, so the counts add."""
    import torch
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            n += m.in_channels // m.groups * int(np.prod(m.kernel_size)) + 16
        elif isinstance(m, torch.nn.Linear):
            n += m.in_features + 16
        elif isinstance(m, torch.nn.MultiheadAttention):
            n += m.embed_dim + m.head_dim + 2 * seq + 3 * 16
        elif isinstance(m, torch.nn.LSTM):
            n += seq * (m.input_size + m.hidden_size + 2 * 16) * m.num_layers
        elif isinstance(m, torch.nn.LayerNorm):
            n += 2 * int(np.prod(m.normalized_shape)) + 16
        elif not list(m.children()):
            n += 16
        if type(m).__name__ in ("BasicBlock", "Bottleneck", "TransformerEncoderLayer"):
            n += 2 * 16  # the residual adds
    return n
