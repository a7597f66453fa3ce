// The Adam/AdamW update of one element (numerics.md §17): one source for the scalar reference
// (reference_nn.cpp) and the fast paths (fast_nn.hpp). No namespace of its own: it is included
// inside each code path's namespace, so no copy compiled with AVX flags can serve another path
// (see math/simd.hpp). Requires <cmath> and kernels.hpp.

template <class T>
inline void adam_element(T& p, T g, T& m, T& v, const AdamCoef<T>& c) {
  if (c.decay) {
    if (c.decoupled) p = p * c.shrink;
    else g = g + c.wd * p;
  }
  m = canon(c.b1 * m + c.ob1 * g);
  v = canon(c.b2 * v + c.ob2 * (g * g));
  const T denom = std::sqrt(v) / c.s2 + c.eps;
  p = canon(p - c.c1 * (m / denom));
}
