// The streaming pairwise tree of the batch rule (numerics.md, "batch rule"). No namespace and
// no include guard of its own: kernels.hpp includes it in bitgrad::kern, and each code-path file
// again inside its own namespace (bitgrad::kern::avx2, ...), where it is compiled for that ISA and
// stacks the ISA's vectors with their own operator+ inlined (a baseline template cannot inline
// an ISA function, and an instance of it with an ISA type would pass vectors by value across the
// two; math/isa_targets.hpp). Requires <utility>.

// Streaming pairwise tree over a sequence of partial results (numerics.md, "batch rule"):
// push block results in order; total() folds what is left from the top (right) down.
// Combines left + right with Add (operator+ by default). Every batch-rule kernel uses it, and
// so does the training step for its micro-batches' gradients.
struct Plus {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a + b;
  }
};
template <class T, class Add = Plus, int MaxLevels = 64>
struct PairwiseStack {
  T val[MaxLevels];
  int level[MaxLevels];
  int n = 0;
  void push(T v) {
    int l = 0;
    while (n > 0 && level[n - 1] == l) {
      v = Add{}(val[n - 1], v);
      --n;
      ++l;
    }
    val[n] = std::move(v);
    level[n] = l;
    ++n;
  }
  T total() const {
    if (n == 0) return T();
    T r = val[n - 1];
    for (int i = n - 2; i >= 0; --i) r = Add{}(val[i], r);
    return r;
  }
  void clear() {
    for (int i = 0; i < n; ++i) val[i] = T();
    n = 0;
  }
};
