// GEMM frame, BLIS style, written once for every code path: panels of A (MR rows) and B (NR
// columns) are packed k-major, cache blocks kc / mc / nc bound the working sets, threads split
// the output, and the batch tree merges block results. The microkernel traits UK
// (gemm_ukernel.hpp: RegTile) bring the register tile, its block sizes and the ISA. The
// canonical order is kept exactly:
//   chain      every C element is one fma chain over k = 0..K-1 from +0; blocking over k
//              carries the accumulator through C (load C into the registers), so the chain
//              is unchanged; + bias after the last k.
//   batch_tree every block of kBatchBlock k's is a chain from +0 (one microkernel call);
//              block tiles are merged by the pairwise stack per tile; chunks of kTreeChunk
//              k's (a power-of-two number of blocks, so each is a complete subtree) are
//              merged by the same stack over whole sub-matrices.
// Threads split the output into column (or row) panels; each element is computed by one
// thread with the full k range, so the partition never changes a bit.
//
// Included inside an ISA namespace after gemm_ukernel.hpp (its inline code is compiled with
// that ISA's flags, so nothing leaks from one code path to another).

template <class T>
struct AlignedBuf {
  T* p = nullptr;
  std::size_t cap = 0;
  AlignedBuf() = default;
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
  ~AlignedBuf() { std::free(p); }
  T* get(std::size_t n) {
    if (n > cap) {
      std::free(p);
      std::size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
      p = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!p) throw std::bad_alloc();
      cap = n;
    }
    return p;
  }
};

inline constexpr std::int64_t kTreeChunk = 4096;  // k per batch_tree chunk: 128 blocks
static_assert(kTreeChunk % kBatchBlock == 0 && ((kTreeChunk / kBatchBlock) & (kTreeChunk / kBatchBlock - 1)) == 0,
              "a tree chunk must hold a power-of-two number of blocks");

template <class UK>
struct GemmFrame {
  using T = typename UK::T;
  static constexpr int MR = UK::MR;
  static constexpr int NR = UK::NR;
  static constexpr std::int64_t KC = UK::KC, MC = UK::MC, NC = UK::NC;
  static constexpr double kEff = UK::kEff;
  static_assert(MC % MR == 0, "mc must be a multiple of mr");

  // Ap: ceil(mc/MR) panels, each kc x MR (k-major), rows past mc zero
  static void pack_a(std::int64_t mc, std::int64_t kc, const T* A, std::int64_t rsa, std::int64_t csa, T* Ap) {
    for (std::int64_t p0 = 0; p0 < mc; p0 += MR) {
      T* dst = Ap + (p0 / MR) * kc * MR;
      const std::int64_t rows = mc - p0 < MR ? mc - p0 : MR;
      if (rsa == 1) {
        for (std::int64_t k = 0; k < kc; ++k) {
          const T* src = A + p0 + k * csa;
#pragma GCC unroll 16
          for (int i = 0; i < MR; ++i) dst[k * MR + i] = i < rows ? src[i < rows ? i : 0] : T(0);
        }
      } else {
        for (std::int64_t i = 0; i < rows; ++i) {
          const T* src = A + (p0 + i) * rsa;
          for (std::int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k * csa];
        }
        if (rows < MR)
          for (std::int64_t k = 0; k < kc; ++k)
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i)
              if (i >= rows) dst[k * MR + i] = T(0);
      }
    }
  }

  // Bp: ceil(nc/NR) panels, each kc x NR (k-major), columns past nc zero
  static void pack_b(std::int64_t kc, std::int64_t nc, const T* B, std::int64_t rsb, std::int64_t csb, T* Bp) {
    for (std::int64_t q0 = 0; q0 < nc; q0 += NR) {
      T* dst = Bp + (q0 / NR) * kc * NR;
      const std::int64_t cols = nc - q0 < NR ? nc - q0 : NR;
      if (csb == 1) {
        for (std::int64_t k = 0; k < kc; ++k) {
          const T* src = B + k * rsb + q0;
          if (cols == NR) {
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[j];
          } else {
            // whole vectors, the columns past `cols` loaded as +0 (masked: nothing past the
            // row is read), so no per-row memset or copy call for a partial panel
            using Tr = VT<T>;
#pragma GCC unroll 4
            for (int j0 = 0; j0 < NR; j0 += Tr::W) {
              const std::int64_t n = cols - j0;
              Tr::store_raw(dst + k * NR + j0, Tr::load_part(src + j0, static_cast<int>(n < 0 ? 0 : n), T(0)));
            }
          }
        }
      } else {
        // a partial panel: zero whole rows first (fixed-size vector stores), columns below
        if (cols < NR)
          for (std::int64_t k = 0; k < kc; ++k) {
            T* row = dst + k * NR;
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) row[j] = T(0);
          }
        std::int64_t k0 = 0, jv = 0;
        if constexpr (UK::kTransposeW > 0) {
          // B stored transposed (rows of W contiguous in k): the microkernel's block transposes
          // for every whole group of TW columns, the rest below
          constexpr int TW = UK::kTransposeW;
          if (rsb == 1 && cols >= TW) {
            jv = cols / TW * TW;
            for (; k0 + TW <= kc; k0 += TW)
              for (std::int64_t v = 0; v < jv; v += TW) UK::transpose_block(B + (q0 + v) * csb + k0, csb, dst + k0 * NR + v, NR);
          }
        }
        for (std::int64_t j = 0; j < cols; ++j) {
          const T* src = B + (q0 + j) * csb;
          for (std::int64_t k = j < jv ? k0 : 0; k < kc; ++k) dst[k * NR + j] = src[k * rsb];
        }

      }
    }
  }

  static AlignedBuf<T>& abuf() {
    thread_local AlignedBuf<T> b;
    return b;
  }
  static AlignedBuf<T>& bbuf() {
    thread_local AlignedBuf<T> b;
    return b;
  }

  // C[i0:i1, j0:j1] in chain order
  static void run_chain(const GemmArgs<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    alignas(64) T tile[MR * NR];
    alignas(64) T biasp[NR];
    T* Bp = bbuf().get(static_cast<std::size_t>(KC * ((NC + NR - 1) / NR) * NR));
    T* Ap = abuf().get(static_cast<std::size_t>(KC * MC));
    for (std::int64_t jc = j0; jc < j1; jc += NC) {
      const std::int64_t nc = j1 - jc < NC ? j1 - jc : NC;
      for (std::int64_t pc = 0; pc < g.K; pc += KC) {
        const std::int64_t kc = g.K - pc < KC ? g.K - pc : KC;
        const bool first = pc == 0, last = pc + kc == g.K;
        pack_b(kc, nc, g.B + pc * g.rsb + jc * g.csb, g.rsb, g.csb, Bp);
        // row-major A is read in place by full panels; only its last partial panel is packed
        const bool a_rows = g.csa == 1 && g.rsa >= 1;
        for (std::int64_t ic = i0; ic < i1; ic += MC) {
          const std::int64_t mc = i1 - ic < MC ? i1 - ic : MC;
          if (!a_rows) {
            pack_a(mc, kc, g.A + ic * g.rsa + pc * g.csa, g.rsa, g.csa, Ap);
          } else if (mc % MR) {
            const std::int64_t p_last = mc / MR * MR;
            pack_a(mc - p_last, kc, g.A + (ic + p_last) * g.rsa + pc, g.rsa, 1, Ap + (p_last / MR) * kc * MR);
          }
          for (std::int64_t q0 = 0; q0 < nc; q0 += NR) {
            const std::int64_t jj = jc + q0;
            const int nv = static_cast<int>(nc - q0 < NR ? nc - q0 : NR);
            const T* bp = nullptr;
            if (last && g.bias) {
              if (nv == NR) {
                bp = g.bias + jj;
              } else {
                for (int j = 0; j < NR; ++j) biasp[j] = j < nv ? g.bias[jj + j] : T(0);
                bp = biasp;
              }
            }
            const T* bpanel = Bp + (q0 / NR) * kc * NR;
            for (std::int64_t p0 = 0; p0 < mc; p0 += MR) {
              const std::int64_t ii = ic + p0;
              const int mv = static_cast<int>(mc - p0 < MR ? mc - p0 : MR);
              const T* apanel = Ap + (p0 / MR) * kc * MR;
              T* cp = g.C + ii * g.ldc + jj;
              const bool in_place = a_rows && mv == MR;
              const T* arow = g.A + ii * g.rsa + pc;
              if (mv == MR && nv == NR) {
                if (in_place) UK::chain_rows(kc, arow, g.rsa, bpanel, cp, g.ldc, !first, bp);
                else UK::chain(kc, apanel, bpanel, cp, g.ldc, !first, bp);
              } else {
                if (!first)
                  for (int i = 0; i < MR; ++i)
                    for (int j = 0; j < NR; ++j) tile[i * NR + j] = (i < mv && j < nv) ? cp[i * g.ldc + j] : T(0);
                if (in_place) UK::chain_rows(kc, arow, g.rsa, bpanel, tile, NR, !first, bp);
                else UK::chain(kc, apanel, bpanel, tile, NR, !first, bp);
                for (int i = 0; i < mv; ++i)
                  for (int j = 0; j < nv; ++j) cp[i * g.ldc + j] = tile[i * NR + j];
              }
            }
          }
        }
      }
    }
  }

  // Pairwise stack of whole tiles / sub-matrices: slot n holds the newest partial.
  static void merge_push(T* slots, int* level, int& n, std::size_t size) {
    // the newest partial was written to slot n - 1 with level 0
    while (n >= 2 && level[n - 2] == level[n - 1]) {
      T* left = slots + static_cast<std::size_t>(n - 2) * size;
      const T* right = slots + static_cast<std::size_t>(n - 1) * size;
      for (std::size_t e = 0; e < size; ++e) left[e] = left[e] + right[e];
      level[n - 2] += 1;
      --n;
    }
  }
  static void merge_total(T* slots, int n, std::size_t size) {  // result in slot n - 1
    T* r = slots + static_cast<std::size_t>(n - 1) * size;
    for (int i = n - 2; i >= 0; --i) {
      const T* left = slots + static_cast<std::size_t>(i) * size;
      for (std::size_t e = 0; e < size; ++e) r[e] = left[e] + r[e];
    }
  }

  // C[i0:i1, j0:j1] in batch_tree order
  static void run_tree(const GemmArgs<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    constexpr int kMaxTileLevels = 10;  // 128 blocks per chunk: 8 levels suffice
    alignas(64) T tslots[kMaxTileLevels * MR * NR];
    int tlevel[kMaxTileLevels];
    const std::int64_t chunk = g.K <= kTreeChunk ? g.K : kTreeChunk;
    const std::int64_t nchunks = (g.K + chunk - 1) / chunk;
    const std::int64_t msub = i1 - i0;
    T* Bp = bbuf().get(static_cast<std::size_t>(chunk * ((NC + NR - 1) / NR) * NR));
    T* Ap = abuf().get(static_cast<std::size_t>(chunk * MC));
    // chunk-level stack over sub-matrices msub x nc (only when K spans several chunks)
    thread_local std::vector<T> cslots;  // kept across calls: no heap allocation per GEMM
    thread_local std::vector<int> clevel;
    for (std::int64_t jc = j0; jc < j1; jc += NC) {
      const std::int64_t nc = j1 - jc < NC ? j1 - jc : NC;
      const std::size_t csize = static_cast<std::size_t>(msub * nc);
      int cn = 0;
      if (nchunks > 1) {
        int levels = 2;
        while ((std::int64_t(1) << (levels - 2)) < nchunks) ++levels;
        cslots.assign(csize * static_cast<std::size_t>(levels), T(0));
        clevel.assign(static_cast<std::size_t>(levels), 0);
      }
      for (std::int64_t pc = 0; pc < g.K; pc += chunk) {
        const std::int64_t kc = g.K - pc < chunk ? g.K - pc : chunk;
        // destination of this chunk's result
        T* dst;
        std::int64_t ldd;
        if (nchunks > 1) {
          dst = cslots.data() + static_cast<std::size_t>(cn) * csize;
          ldd = nc;
        } else {
          dst = g.C + i0 * g.ldc + jc;
          ldd = g.ldc;
        }
        pack_b(kc, nc, g.B + pc * g.rsb + jc * g.csb, g.rsb, g.csb, Bp);
        for (std::int64_t ic = i0; ic < i1; ic += MC) {
          const std::int64_t mc = i1 - ic < MC ? i1 - ic : MC;
          pack_a(mc, kc, g.A + ic * g.rsa + pc * g.csa, g.rsa, g.csa, Ap);
          for (std::int64_t q0 = 0; q0 < nc; q0 += NR) {
            const int nv = static_cast<int>(nc - q0 < NR ? nc - q0 : NR);
            const T* bpanel = Bp + (q0 / NR) * kc * NR;
            for (std::int64_t p0 = 0; p0 < mc; p0 += MR) {
              const int mv = static_cast<int>(mc - p0 < MR ? mc - p0 : MR);
              const T* apanel = Ap + (p0 / MR) * kc * MR;
              int tn = 0;
              for (std::int64_t b0 = 0; b0 < kc; b0 += kBatchBlock) {
                const std::int64_t kb = kc - b0 < kBatchBlock ? kc - b0 : kBatchBlock;
                UK::tree_block(kb, apanel + b0 * MR, bpanel + b0 * NR, tslots, tlevel, tn);
              }
              merge_total(tslots, tn, static_cast<std::size_t>(MR * NR));
              const T* res = tslots + (tn - 1) * MR * NR;
              T* out = dst + (ic - i0 + p0) * ldd + q0;
              for (int i = 0; i < mv; ++i)
                for (int j = 0; j < nv; ++j) out[i * ldd + j] = canon(res[i * NR + j]);
            }
          }
        }
        if (nchunks > 1) {
          clevel[static_cast<std::size_t>(cn)] = 0;
          ++cn;
          merge_push(cslots.data(), clevel.data(), cn, csize);
        }
      }
      if (nchunks > 1) {
        merge_total(cslots.data(), cn, csize);
        const T* res = cslots.data() + static_cast<std::size_t>(cn - 1) * csize;
        for (std::int64_t i = 0; i < msub; ++i)
          for (std::int64_t j = 0; j < nc; ++j) g.C[(i0 + i) * g.ldc + jc + j] = canon(res[i * nc + j]);
      }
    }
  }

  // Fraction of a padded tile grid that holds real elements.
  static double fill(std::int64_t m, std::int64_t n) {
    return (static_cast<double>(m) / (((m + MR - 1) / MR) * MR)) * (static_cast<double>(n) / (((n + NR - 1) / NR) * NR));
  }

  static void run(const GemmArgs<T>& g) {
    if (g.M == 0 || g.N == 0) return;
    // A narrow C wastes most of each NR-wide tile: compute C^T = B^T A^T instead (each
    // element is the same fma chain, fma(a, b, c) == fma(b, a, c)) and transpose it back.
    if (g.K > 0 && g.N < NR && fill(g.N, g.M) > 1.5 * fill(g.M, g.N)) run_transposed(g);
    else run_split(g);
  }

  static void run_transposed(const GemmArgs<T>& g) {
    thread_local std::vector<T> ct;
    ct.resize(static_cast<std::size_t>(g.M * g.N));
    GemmArgs<T> s;
    s.M = g.N;
    s.N = g.M;
    s.K = g.K;
    s.A = g.B;
    s.rsa = g.csb;
    s.csa = g.rsb;
    s.B = g.A;
    s.rsb = g.csa;
    s.csb = g.rsa;
    s.C = ct.data();
    s.ldc = g.M;
    s.order = g.order;
    run_split(s);
    for (std::int64_t i = 0; i < g.M; ++i)
      for (std::int64_t j = 0; j < g.N; ++j) {
        const T v = ct[static_cast<std::size_t>(j * g.M + i)];
        g.C[i * g.ldc + j] = canon(g.bias ? v + g.bias[j] : v);
      }
  }

  static void run_split(const GemmArgs<T>& g) {
    if (g.M == 0 || g.N == 0) return;
    if (g.K == 0) {
      for (std::int64_t i = 0; i < g.M; ++i)
        for (std::int64_t j = 0; j < g.N; ++j)
          g.C[i * g.ldc + j] = canon((g.order == KOrder::chain && g.bias) ? T(0) + g.bias[j] : T(0));
      return;
    }
    // split the larger panel count over threads; at least ~2^18 fmas per chunk
    const std::int64_t mp = (g.M + MR - 1) / MR, np = (g.N + NR - 1) / NR;
    const bool split_n = np >= mp;
    const std::int64_t panels = split_n ? np : mp;
    const std::int64_t per_panel = (split_n ? g.M * NR : g.N * MR) * g.K;
    const std::int64_t grain = per_panel >= (1 << 18) ? 1 : (1 << 18) / (per_panel > 0 ? per_panel : 1);
    parallel_for(panels, grain, [&](std::int64_t a, std::int64_t b) {
      std::int64_t i0 = 0, i1 = g.M, j0 = 0, j1 = g.N;
      if (split_n) {
        j0 = a * NR;
        j1 = b * NR < g.N ? b * NR : g.N;
      } else {
        i0 = a * MR;
        i1 = b * MR < g.M ? b * MR : g.M;
      }
      if (g.order == KOrder::chain) run_chain(g, i0, i1, j0, j1);
      else run_tree(g, i0, i1, j0, j1);
    });
  }
};

// Several microkernels of one code path (widest first): the one whose tiles are best filled by
// C or by C^T wins. Every variant computes every element with the same chain or tree, so the
// choice depends on the shape only and never moves a bit.
template <class T, class... UKs>
void gemm_multi(const GemmArgs<T>& g) {
  static_assert((std::is_same_v<T, typename UKs::T> && ...), "microkernels of another type");
  if (g.M == 0 || g.N == 0) return;
  double best = -1.0;
  int pick = 0, i = 0;
  bool transposed = false;
  auto consider = [&](double score, bool t) {
    if (score > best) best = score, pick = i, transposed = t;
  };
  ((consider(GemmFrame<UKs>::kEff * GemmFrame<UKs>::fill(g.M, g.N), false),
    g.K > 0 ? consider(GemmFrame<UKs>::kEff * GemmFrame<UKs>::fill(g.N, g.M) / 1.5, true) : void(), ++i),
   ...);
  i = 0;
  ((i++ == pick ? (transposed ? GemmFrame<UKs>::run_transposed(g) : GemmFrame<UKs>::run_split(g)) : void()), ...);
}
