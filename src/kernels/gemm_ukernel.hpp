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

  inline void zero() {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
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
  inline void store_raw(T* c, std::int64_t ldc) const {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
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
  // v = left + v, for the pairwise tree
  inline void add_left(const T* left, std::int64_t ld) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) v[i][j] = Tr::load(left + i * ld + j * W) + v[i][j];
  }
  // v[i] = fma(a(i, k), b[k], v[i]) for k = 0 .. kc-1: the canonical chain
  template <class AAt>
  inline void chain(std::int64_t kc, AAt a_at, const T* __restrict b) {
    for (std::int64_t k = 0; k < kc; ++k) {
      V bv[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) bv[j] = Tr::load(b + j * W);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
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
  // the last block is folded with every waiting one from the top down, which is what pushing
  // it and folding the stack does (numerics §2).
  template <class AAt>
  static inline void chunk_tree(A& acc, std::int64_t kc, AAt a_at, const T* __restrict b, T* slots) {
    // the stack as a moving top pointer, so that a store or a merge is one base register plus
    // constant offsets (per-entry indices made the compiler keep, and spill, 12 addresses)
    int level[kChunkLevels];
    int* lv_top = level;
    T* top = slots;
    std::int64_t b0 = 0;
    for (;;) {
      const std::int64_t kb = kc - b0 < kBatchBlock ? kc - b0 : kBatchBlock;
      acc.zero();
      acc.chain(kb, [a_at, b0](int i, std::int64_t k) { return a_at(i, b0 + k); }, b + b0 * NR);
      b0 += kb;
      if (b0 >= kc) break;
      int lv = 0;
      while (lv_top != level && lv_top[-1] == lv) {
        top -= MR * NR;
        acc.add_left(top, NR);
        --lv_top;
        ++lv;
      }
      acc.store_raw(top, NR);
      top += MR * NR;
      *lv_top++ = lv;
    }
    while (top != slots) {
      top -= MR * NR;
      acc.add_left(top, NR);
    }
  }
};
