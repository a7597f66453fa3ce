// GEMM microkernels (BLIS's part that knows the ISA): an MR x NR tile of C held in registers,
// written once over the lane types of simd.hpp, with the cache blocks of the code path. An
// ISA file names its tiles, e.g. RegTile<float, 6, 2, 384, 72, 2048>, and hands them to the
// frame (gemm_impl.hpp), which owns packing, blocking, threading and the merges of chunks.
// A microkernel call computes one chunk of k of a tile in the canonical order (numerics §5):
// blocks of kBatchBlock k's, each an fma chain from +0, merged by the pairwise stack.
//
// Included inside an ISA namespace after fast_impl.hpp.

// An MR x (NV vectors) tile of C held in registers.
template <class T, int MR, int NV>
struct Acc {
  using Tr = VT<T>;
  using V = typename Tr::V;
  static constexpr int W = Tr::W;
  static constexpr int NR = NV * W;
  V v[MR][NV];

  // The row-range forms [R0, R1) let the microkernel finish one half of a tile while the
  // other still holds its last block (chunk_tree); the whole-tile forms are R0 = 0, R1 = MR.
  template <int R0 = 0, int R1 = MR>
  inline void zero() {
#pragma GCC unroll 16
    for (int i = R0; i < R1; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = V(T(0));
  }
  inline void load(const T* c, std::int64_t ldc) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = Tr::load(c + i * ldc + j * W);
  }
  inline void store(T* c, std::int64_t ldc) const {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) Tr::store(c + i * ldc + j * W, v[i][j]);
  }
  // without canonicalizing NaNs: partial sums kept for the tree (the result's store does it)
  template <int R0 = 0, int R1 = MR>
  inline void store_raw(T* c, std::int64_t ldc) const {
#pragma GCC unroll 16
    for (int i = R0; i < R1; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) Tr::store_raw(c + i * ldc + j * W, v[i][j]);
  }
  // v = v + bias (one bias row for every row of the tile)
  inline void add_bias(const T* bias) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = v[i][j] + Tr::load(bias + j * W);
  }
  // v = v + r.v: a running sum, then its next term (both in registers)
  inline void add(const Acc& r) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = v[i][j] + r.v[i][j];
  }
  // v = left + v, for the pairwise tree
  template <int R0 = 0, int R1 = MR>
  inline void add_left(const T* left, std::int64_t ld) {
#pragma GCC unroll 16
    for (int i = R0; i < R1; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = Tr::load(left + i * ld + j * W) + v[i][j];
  }
  // v[i] = fma(a(i, k), b[k], v[i]) for k = 0 .. kc-1: the canonical chain
  template <int R0 = 0, int R1 = MR, class AAt>
  inline void chain(std::int64_t kc, AAt a_at, const T* __restrict b) {
    for (std::int64_t k = 0; k < kc; ++k) {
      V bv[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) bv[j] = Tr::load(b + j * W);
#pragma GCC unroll 16
      for (int i = R0; i < R1; ++i) {
        const V av = V(a_at(i, k));
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) v[i][j] = fma(av, bv[j], v[i][j]);
      }
      b += NR;
    }
  }
};

// The microkernel traits the frame is templated on: tile MR x (NV vectors), cache blocks
// KC x MC x NC.
template <class T_, int MR_, int NV_, int KC_, int MC_, int NC_>
struct RegTile {
  using T = T_;
  using A = Acc<T, MR_, NV_>;
  static constexpr int MR = MR_;
  static constexpr int NR = A::NR;
  static constexpr std::int64_t KC = KC_, MC = MC_, NC = NC_;
  // Relative speed per useful fma: narrow tiles need more loads per fma.
  static constexpr double kEff = NV_ >= 3 ? 1.0 : NV_ == 2 ? 0.9 : 0.75;
  // Side of the square block transpose used to pack a B stored transposed (0: none).
  static constexpr int kTransposeW = std::is_same_v<T, float> ? kWF : 0;

  // dst[c*ldd + r] = src[r*lds + c] for a kTransposeW square block
  static void transpose_block(const T* src, std::int64_t lds, T* dst, std::int64_t ldd) {
    if constexpr (std::is_same_v<T, float>) transpose_f32_block(src, lds, dst, ldd);
  }

  // Levels of a chunk's pairwise stack: chunks hold at most 2^(kChunkLevels - 1) blocks.
  static constexpr int kChunkLevels = 8;
  // k per chunk: the largest power-of-two number of blocks within kc (the frame's chunk)
  static constexpr std::int64_t chunk_of(std::int64_t kc) {
    std::int64_t c = kBatchBlock;
    while (c * 2 <= kc) c *= 2;
    return c;
  }
  static constexpr std::int64_t kFullChunk = chunk_of(KC_);

  // acc = the pairwise tree of one chunk of kc k's (kc >= 1): blocks of kBatchBlock k's (the
  // last possibly short), each an fma chain from +0, a(i, k) and the k-major packed B panel b
  // (NR per k). Finished blocks wait in `slots` (kChunkLevels tiles, L1) with their levels;
  // a finished block is folded with the waiting ones of its level from the top down and pushed,
  // the last one folded with every waiting one (numerics §2).
  // A finished block leaves the registers one half of the tile at a time: the upper rows are
  // folded, stored and start the next block's first kLead k's before the lower rows follow.
  // Each element's sequence of operations is the same; the stores of a tile no longer come in
  // one burst, which on Zen 3 cost a tenth of the GEMM (docs/benchmarks.md).
  static_assert(MR_ >= 2, "a tile leaves the registers in two halves of rows");
  static constexpr int kHalf = MR_ / 2;
  static constexpr std::int64_t kLead = 4;
  template <int R0, int R1, class AAt>
  [[gnu::always_inline]] static inline void next_block_rows(A& acc, T* top, T* dst, std::int64_t lead, AAt a_at, const T* __restrict b) {
    for (T* t = top; t != dst;) {
      t -= MR * NR;
      acc.template add_left<R0, R1>(t, NR);
    }
    acc.template store_raw<R0, R1>(dst, NR);
    acc.template zero<R0, R1>();
    acc.template chain<R0, R1>(lead, a_at, b);
  }
  // always inlined: a call would take the tile by reference, out of its registers
  template <class AAt>
  [[gnu::always_inline]] static inline void chunk_tree(A& acc, std::int64_t kc, AAt a_at, const T* __restrict b, T* slots) {
    // the stack as a moving top pointer, so that a store or a merge is one base register plus
    // constant offsets (per-entry indices made the compiler keep, and spill, 12 addresses)
    int level[kChunkLevels];
    int* lv_top = level;
    T* top = slots;
    std::int64_t b0 = kc < kBatchBlock ? kc : kBatchBlock;
    acc.zero();
    acc.chain(b0, a_at, b);
    while (b0 < kc) {
      // the finished block merges with the m waiting entries of its level and lands at dst
      int lv = 0, m = 0;
      while (lv_top - m != level && lv_top[-1 - m] == lv) ++m, ++lv;
      T* const dst = top - m * MR * NR;
      const std::int64_t kb = kc - b0 < kBatchBlock ? kc - b0 : kBatchBlock, lead = kb < kLead ? kb : kLead;
      auto at = [a_at, b0](int i, std::int64_t k) { return a_at(i, b0 + k); };
      const T* bb = b + b0 * NR;
      next_block_rows<0, kHalf>(acc, top, dst, lead, at, bb);
      next_block_rows<kHalf, MR>(acc, top, dst, lead, at, bb);
      if (kb > lead) acc.chain(kb - lead, [a_at, b0, lead](int i, std::int64_t k) { return a_at(i, b0 + lead + k); }, bb + lead * NR);
      lv_top -= m;
      *lv_top++ = lv;
      top = dst + MR * NR;
      b0 += kb;
    }
    while (top != slots) {
      top -= MR * NR;
      acc.add_left(top, NR);
    }
  }
};
