// GEMM frame, BLIS style, written once for every code path: panels of A (MR rows) and B (NR
// columns) are packed k-major, cache blocks (a chunk of k) / mc / nc bound the working sets,
// threads split the output, and the pairwise tree merges what the blocks of k give. The
// microkernel traits UK (gemm_ukernel.hpp: RegTile) bring the register tile, its block sizes and
// the ISA. The canonical order (numerics §5) is kept exactly: k in blocks of kBatchBlock, each
// an fma chain from +0, the blocks merged by the pairwise tree, then + bias. How:
//   * a chunk of k is a power-of-two number of blocks (kChunk), so each chunk's tree is a
//     complete subtree; the microkernel computes it in registers (chunk_tree), and the chunks'
//     results are merged by the same stack per tile, kept in memory between chunks;
//   * threads split the output into column (or row) panels; where the output has too few
//     panels to feed the threads, they split k instead (split-K): the blocks are cut at the
//     tree's own nodes (subtrees of the canonical recursion), each thread computes whole
//     subtrees, and the nodes above them are added as the tree adds them. Neither the
//     partition of the output nor that of k can change a bit.
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

// fmas per chunk of work the threads share: a GEMM with fewer is not split (run_split) and goes
// whole to one thread (gemm_batch)
inline constexpr std::int64_t kGemmGrain = std::int64_t(1) << 18;

template <class UK>
struct GemmFrame {
  using T = typename UK::T;
  static constexpr int MR = UK::MR;
  static constexpr int NR = UK::NR;
  static constexpr std::int64_t KC = UK::KC, MC = UK::MC, NC = UK::NC;
  static constexpr double kEff = UK::kEff;
  static constexpr std::int64_t kGrain = kGemmGrain;
  static_assert(MC % MR == 0, "mc must be a multiple of mr");
  // column blocks of whole panels (a packed B's panels then start at every block)
  static constexpr std::int64_t NCP = NC / NR * NR;
  static_assert(NCP > 0, "nc must hold a panel");

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

  // k per chunk: the largest power-of-two number of blocks within the code path's kc
  static constexpr std::int64_t kChunk = UK::kFullChunk;
  static_assert(kChunk / kBatchBlock < (std::int64_t(1) << (UK::kChunkLevels - 1)), "a chunk's stack would overflow");

  // out[i0:i1, j0:j1] (row stride ldo) = the canonical tree over k in [kb, ke) of A B, + bias
  // (a vector over j, or null). [kb, ke) starts on a block boundary and is a subtree of the
  // canonical recursion (all of k, or a split-K leaf), so its own tree is the subtree's.
  static void run_range(const GemmArgs<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1, std::int64_t kb,
                        std::int64_t ke, T* out, std::int64_t ldo, const T* bias) {
    alignas(64) T tile[MR * NR];
    alignas(64) T biasp[NR];
    alignas(64) T kslots[UK::kChunkLevels * MR * NR];
    T* Bp = bbuf().get(static_cast<std::size_t>(kChunk * ((NC + NR - 1) / NR) * NR));
    T* Ap = abuf().get(static_cast<std::size_t>(kChunk * MC));
    // the chunks' stack, per tile of the current msub x nc block: slot (e, t) at
    // cslots[(e * tiles + t) * MR * NR]; every tile goes through the same chunks, so one
    // level list serves them all
    thread_local std::vector<T> cslots;  // kept across calls: no heap allocation per GEMM
    const std::int64_t msub = i1 - i0, tiles_m = (msub + MR - 1) / MR;
    const bool a_rows = g.csa == 1 && g.rsa >= 1;  // row-major A is read in place by full panels
    // B packed ahead (GemmPacking: this frame's layout) serves a range over all of k
    const bool prepacked = g.Bp && kb == 0 && ke == g.K;
    for (std::int64_t jc = j0; jc < j1; jc += NCP) {
      const std::int64_t nc = j1 - jc < NCP ? j1 - jc : NCP;
      const std::int64_t tiles_n = (nc + NR - 1) / NR, tiles = tiles_m * tiles_n;
      int clevel[64];
      int cn = 0;
      if (ke - kb > kChunk) {
        int levels = 1;
        while ((std::int64_t(1) << (levels - 1)) * kChunk < ke - kb) ++levels;
        cslots.resize(static_cast<std::size_t>(levels * tiles * MR * NR));
      }
      for (std::int64_t pc = kb; pc < ke; pc += kChunk) {
        const std::int64_t kc = ke - pc < kChunk ? ke - pc : kChunk;
        const bool last = pc + kc == ke;
        // this chunk's result merges with the waiting entries of its level and lands at `top`
        // (the last chunk folds every waiting entry, from the top down)
        int top = last ? 0 : cn, lv = 0;
        while (!last && top > 0 && clevel[top - 1] == lv) --top, ++lv;
        const T* bchunk = Bp;
        if (prepacked) bchunk = g.Bp + g.packing.panel(g.K, g.N, pc, jc);
        else pack_b(kc, nc, g.B + pc * g.rsb + jc * g.csb, g.rsb, g.csb, Bp);
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
            const T* bpanel = bchunk + (q0 / NR) * kc * NR;
            for (std::int64_t p0 = 0; p0 < mc; p0 += MR) {
              const std::int64_t ii = ic + p0;
              const int mv = static_cast<int>(mc - p0 < MR ? mc - p0 : MR);
              typename UK::A acc;
              if (a_rows && mv == MR) {
                const T* arow = g.A + ii * g.rsa + pc;
                const std::int64_t lda = g.rsa;
                UK::chunk_tree(acc, kc, [arow, lda](int i, std::int64_t k) { return arow[i * lda + k]; }, bpanel, kslots);
              } else {
                const T* apanel = Ap + (p0 / MR) * kc * MR;
                UK::chunk_tree(acc, kc, [apanel](int i, std::int64_t k) { return apanel[k * MR + i]; }, bpanel, kslots);
              }
              const std::int64_t t = ((ii - i0) / MR) * tiles_n + q0 / NR;
              auto slot = [&](int e) { return cslots.data() + static_cast<std::size_t>((e * tiles + t) * MR * NR); };
              for (int e = cn - 1; e >= top; --e) acc.add_left(slot(e), NR);
              if (!last) {
                acc.store_raw(slot(top), NR);
                continue;
              }
              if (bias) {
                if (nv == NR) {
                  acc.add_bias(bias + jj);
                } else {
                  for (int j = 0; j < NR; ++j) biasp[j] = j < nv ? bias[jj + j] : T(0);
                  acc.add_bias(biasp);
                }
              }
              T* op = out + (ii - i0) * ldo + (jj - j0);
              if (mv == MR && nv == NR) {
                acc.store(op, ldo);
              } else {
                acc.store(tile, NR);
                for (int i = 0; i < mv; ++i)
                  for (int j = 0; j < nv; ++j) op[i * ldo + j] = tile[i * NR + j];
              }
            }
          }
        }
        if (!last) {
          clevel[top] = lv;
          cn = top + 1;
        }
      }
    }
  }

  // Fraction of a padded tile grid that holds real elements.
  static double fill(std::int64_t m, std::int64_t n) {
    return (static_cast<double>(m) / (((m + MR - 1) / MR) * MR)) * (static_cast<double>(n) / (((n + NR - 1) / NR) * NR));
  }

  // A narrow C wastes most of each NR-wide tile: compute C^T = B^T A^T instead (each
  // element is the same tree of the same fmas, fma(a, b, c) == fma(b, a, c)) and transpose it back.
  static bool transposes(std::int64_t M, std::int64_t N, std::int64_t K) { return K > 0 && N < NR && fill(N, M) > 1.5 * fill(M, N); }
  static void run(const GemmArgs<T>& g) {
    if (g.M == 0 || g.N == 0) return;
    if (transposes(g.M, g.N, g.K)) run_transposed(without_packed(g));
    else run_split(g);
  }
  // The packed B this frame reads for [M, K] x [K, N]: its panels and chunks (none where it
  // computes C^T)
  static GemmPacking packing(std::int64_t M, std::int64_t N, std::int64_t K) {
    return transposes(M, N, K) ? GemmPacking{} : GemmPacking{NR, kChunk};
  }
  // g reading B itself (then required), or without a packed B that is not this frame's
  static GemmArgs<T> without_packed(const GemmArgs<T>& g) {
    if (!g.Bp) return g;
    if (!g.B) throw std::invalid_argument("gemm: B packed for another microkernel or form, and no B");
    GemmArgs<T> u = g;
    u.Bp = nullptr;
    return u;
  }
  static GemmArgs<T> unpacked(const GemmArgs<T>& g) { return g.packing == GemmPacking{NR, kChunk} ? g : without_packed(g); }

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
    run_split(s);
    for (std::int64_t i = 0; i < g.M; ++i)
      for (std::int64_t j = 0; j < g.N; ++j) {
        const T v = ct[static_cast<std::size_t>(j * g.M + i)];
        g.C[i * g.ldc + j] = canon(g.bias ? v + g.bias[j] : v);
      }
  }

  // The leaves of a split-K: subtrees of the canonical recursion over blocks [lo, hi) (tree =
  // tree of the first h blocks + tree of the rest, h the largest power of two below the count),
  // cut until each holds at most `most` blocks. Nodes in post order: a leaf is {lo, hi, -1, -1},
  // an inner node names its two children.
  struct KNode {
    std::int64_t lo, hi;
    int left, right;
  };
  static int split_k(std::int64_t lo, std::int64_t hi, std::int64_t most, std::vector<KNode>& nodes) {
    if (hi - lo <= most) {
      nodes.push_back({lo, hi, -1, -1});
      return static_cast<int>(nodes.size()) - 1;
    }
    std::int64_t h = 1;
    while (h * 2 < hi - lo) h *= 2;
    const int l = split_k(lo, lo + h, most, nodes);
    const int r = split_k(lo + h, hi, most, nodes);
    nodes.push_back({lo, hi, l, r});
    return static_cast<int>(nodes.size()) - 1;
  }

  static void run_split_k(const GemmArgs<T>& g, int threads) {
    const std::int64_t nblocks = (g.K + kBatchBlock - 1) / kBatchBlock;
    // leaves of about a quarter of a thread's share, so that whole leaves balance the threads
    const std::int64_t share = (nblocks + 4 * threads - 1) / (4 * threads);
    std::vector<KNode> nodes;
    const int root = split_k(0, nblocks, share < 1 ? 1 : share, nodes);
    std::vector<int> leaves;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
      if (nodes[static_cast<std::size_t>(i)].left < 0) leaves.push_back(i);
    const std::size_t mn = static_cast<std::size_t>(g.M * g.N);
    std::vector<T> part(mn * nodes.size());
    // whole leaves to each thread, contiguous in k, about nblocks / threads blocks each
    std::vector<std::size_t> first(static_cast<std::size_t>(threads) + 1, leaves.size());
    first[0] = 0;
    for (std::size_t l = 0, th = 1; l < leaves.size() && th < static_cast<std::size_t>(threads); ++l)
      if (nodes[static_cast<std::size_t>(leaves[l])].hi * static_cast<std::int64_t>(threads) >= static_cast<std::int64_t>(th) * nblocks)
        first[th++] = l + 1;
    for (std::size_t th = 1; th <= static_cast<std::size_t>(threads); ++th)
      if (first[th] < first[th - 1]) first[th] = first[th - 1];
    parallel_for(threads, 1, [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t th = a; th < b; ++th)
        for (std::size_t l = first[static_cast<std::size_t>(th)]; l < first[static_cast<std::size_t>(th) + 1]; ++l) {
          const KNode& nd = nodes[static_cast<std::size_t>(leaves[l])];
          const std::int64_t ke = nd.hi * kBatchBlock < g.K ? nd.hi * kBatchBlock : g.K;
          run_range(g, 0, g.M, 0, g.N, nd.lo * kBatchBlock, ke, part.data() + static_cast<std::size_t>(leaves[l]) * mn, g.N, nullptr);
        }
    });
    // the nodes above the leaves, as the tree adds them: left + right (post order: children first)
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].left < 0) continue;
      const T* l = part.data() + static_cast<std::size_t>(nodes[i].left) * mn;
      const T* r = part.data() + static_cast<std::size_t>(nodes[i].right) * mn;
      T* o = part.data() + i * mn;
      for (std::size_t e = 0; e < mn; ++e) o[e] = l[e] + r[e];
    }
    const T* res = part.data() + static_cast<std::size_t>(root) * mn;
    for (std::int64_t i = 0; i < g.M; ++i)
      for (std::int64_t j = 0; j < g.N; ++j) {
        const T v = res[static_cast<std::size_t>(i * g.N + j)];
        g.C[i * g.ldc + j] = canon(g.bias ? v + g.bias[j] : v);
      }
  }

  static void run_split(const GemmArgs<T>& gin) {
    const GemmArgs<T> g = unpacked(gin);
    if (g.M == 0 || g.N == 0) return;
    if (g.K == 0) {
      for (std::int64_t i = 0; i < g.M; ++i)
        for (std::int64_t j = 0; j < g.N; ++j) g.C[i * g.ldc + j] = canon(g.bias ? T(0) + g.bias[j] : T(0));
      return;
    }
    // split the larger panel count over threads; at least kGrain fmas per chunk
    const std::int64_t mp = (g.M + MR - 1) / MR, np = (g.N + NR - 1) / NR;
    const bool split_n = np >= mp;
    const std::int64_t panels = split_n ? np : mp;
    const std::int64_t per_panel = (split_n ? g.M * NR : g.N * MR) * g.K;
    const std::int64_t grain = per_panel >= kGrain ? 1 : kGrain / (per_panel > 0 ? per_panel : 1);
    // split-K where the output's panels leave threads idle and k holds the work for them (the
    // pool is asked only then: most GEMMs have panels enough)
    const std::int64_t out_chunks = (panels + grain - 1) / grain;
    const std::int64_t nblocks = (g.K + kBatchBlock - 1) / kBatchBlock;
    if (!g.Bp && out_chunks < 64 && nblocks >= 2 && g.M * g.N * g.K >= 2 * kGrain && g.M * g.N <= (std::int64_t(1) << 20) && !in_parallel_region()) {
      const int threads = pool_threads();
      const std::int64_t by_work = g.M * g.N * g.K / kGrain, use = by_work < threads ? by_work : threads;
      if (out_chunks < threads && use > out_chunks) return run_split_k(g, static_cast<int>(use < nblocks ? use : nblocks));
    }
    parallel_for(panels, grain, [&](std::int64_t a, std::int64_t b) {
      std::int64_t i0 = 0, i1 = g.M, j0 = 0, j1 = g.N;
      if (split_n) {
        j0 = a * NR;
        j1 = b * NR < g.N ? b * NR : g.N;
      } else {
        i0 = a * MR;
        i1 = b * MR < g.M ? b * MR : g.M;
      }
      run_range(g, i0, i1, j0, j1, 0, g.K, g.C + i0 * g.ldc + j0, g.ldc, g.bias);
    });
  }
};

// gemm_samples (kernels.hpp): per panel of C's columns, the samples in turn, each sample's tree
// over k (one chunk: K <= kChunk) computed in registers and added to its block's running sum
// (a chain from +0 over the block's 32 samples), the blocks merged by the batch rule's pairwise
// stack: sum_cols's order over each element's stored products, without storing them. Longer k
// (or none) takes the stored form.
// Where k is short (K <= kSmallK: a convolution's samples of a few positions), a tile's running
// sum stays in registers beside the sample's product, on the narrower tile SK (two tiles in the
// registers): the product is a chain of K fma, so a running sum kept in memory cost a load and a
// store per fma at K = 1.
template <class UK, class SK = UK>
struct GemmSamples {
  using F = GemmFrame<UK>;
  using T = typename UK::T;
  static constexpr int MR = UK::MR, NR = UK::NR;
  // measured (resnet18's convolutions, an LSTM's weights, Zen 4): at K = 1
  // the registers' running sum is 2.25x faster, at 4 a tenth, at 16 nothing, at 32 (T = 32
  // steps) the narrower tile and its packing of every sample's B cost more than the stores saved
  static constexpr std::int64_t kSmallK = 8;

  static void run(const GemmSamplesArgs<T>& a, void (*gemm)(const GemmArgs<T>&), void (*sum_cols)(const T*, std::int64_t, std::int64_t, T*)) {
    const GemmArgs<T>& g = a.g;
    if (g.M == 0 || g.N == 0) return;
    if (g.K == 0 || g.K > F::kChunk || a.S == 0) return gemm_samples_stored(a, gemm, sum_cols);
    if constexpr (!std::is_same_v<SK, UK>) {
      // every sample's B of a panel at once: at most 2^20 values (a batch of up to 32768
      // one-position samples); more samples take the path below, the same bits
      if (g.K <= kSmallK && a.S * g.K * SK::NR <= (std::int64_t(1) << 20)) return run_small_k(a);
    }
    // column panels whose block sums stay in cache: M x ncs about 2^17 values
    const std::int64_t tiles_m = (g.M + MR - 1) / MR;
    const std::int64_t ncs = (std::int64_t(1) << 17) / (tiles_m * MR) / NR * NR;
    over_panels<NR>(g.N, ncs > UK::NC ? UK::NC : ncs, [&](std::int64_t j0, std::int64_t nc) { panel(a, j0, nc); });
  }

  // K <= kSmallK: column panels whose samples' packed B (S x K x panel) take about 256 KiB
  static void run_small_k(const GemmSamplesArgs<T>& a) {
    over_panels<SK::NR>(a.g.N, (std::int64_t(1) << 16) / (a.S * a.g.K) / SK::NR * SK::NR,
                        [&](std::int64_t j0, std::int64_t nc) { panel_small_k(a, j0, nc); });
  }

  // f(j0, nc) over C's columns in panels of `ncs` (whole tiles of `W`, at least one), at least a
  // panel per thread where the columns allow (the split cannot move a bit)
  template <int W, class Fn>
  static void over_panels(std::int64_t N, std::int64_t ncs, Fn&& f) {
    if (ncs < W) ncs = W;
    const std::int64_t threads = in_parallel_region() ? 1 : pool_threads();
    const std::int64_t per_thread = ((N + threads - 1) / threads + W - 1) / W * W;
    if (per_thread < ncs) ncs = per_thread;
    const std::int64_t panels = (N + ncs - 1) / ncs;
    parallel_for(panels, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t pn = p0; pn < p1; ++pn) f(pn * ncs, N - pn * ncs < ncs ? N - pn * ncs : ncs);
    });
  }

  // Each tile of the panel: for each sample, its product (one chain of K fma from +0) added to
  // the block's running sum (+0 first), both in registers; a finished block (kBatchBlock
  // samples, or the last) merged with the stack's entries of its level and pushed; the stack
  // folded from the top. The same operations, in the same order, as panel().
  static void panel_small_k(const GemmSamplesArgs<T>& a, std::int64_t j0, std::int64_t nc) {
    using A2 = typename SK::A;
    constexpr int MR2 = SK::MR, NR2 = SK::NR;
    const GemmArgs<T>& g = a.g;
    const std::int64_t K = g.K, S = a.S, tiles_m = (g.M + MR2 - 1) / MR2, tiles_n = (nc + NR2 - 1) / NR2;
    constexpr std::size_t tile = static_cast<std::size_t>(MR2 * NR2);
    // every sample's B for this panel, k-major per tile of NR2 columns, zeros past the panel
    T* Bp = F::bbuf().get(static_cast<std::size_t>(S * tiles_n * K * NR2));
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t tj = 0; tj < tiles_n; ++tj)
        for (std::int64_t k = 0; k < K; ++k) {
          T* dst = Bp + ((s * tiles_n + tj) * K + k) * NR2;
          const T* src = g.B + s * a.sb + k * g.rsb + (j0 + tj * NR2) * g.csb;
          const std::int64_t nv = nc - tj * NR2 < NR2 ? nc - tj * NR2 : NR2;
          for (std::int64_t j = 0; j < nv; ++j) dst[j] = src[j * g.csb];
          for (std::int64_t j = nv; j < NR2; ++j) dst[j] = T(0);
        }
    constexpr int kLevels = 64;  // PairwiseStack's
    int levels = 1;
    for (std::int64_t b = (S + kBatchBlock - 1) / kBatchBlock; b > 1; b = (b + 1) / 2) ++levels;
    thread_local std::vector<T> stack;
    stack.resize(tile * static_cast<std::size_t>(levels));
    auto entry = [&](int e) { return stack.data() + tile * static_cast<std::size_t>(e); };
    alignas(64) T out[tile];
    int level[kLevels];
    for (std::int64_t tj = 0; tj < tiles_n; ++tj) {
      const std::int64_t jj = j0 + tj * NR2;
      const int nv = static_cast<int>(j0 + nc - jj < NR2 ? j0 + nc - jj : NR2);
      for (std::int64_t ti = 0; ti < tiles_m; ++ti) {
        const std::int64_t i0 = ti * MR2;
        const int mv = static_cast<int>(g.M - i0 < MR2 ? g.M - i0 : MR2);
        A2 run, prod;
        run.zero();
        int depth = 0;
        for (std::int64_t s = 0; s < S; ++s) {
          // rows past M read the last row (their sums are not stored)
          const T* As = g.A + s * a.sa + i0 * g.rsa;
          const std::int64_t rsa = g.rsa, csa = g.csa;
          prod.zero();
          prod.chain(K, [As, rsa, csa, mv](int i, std::int64_t k) { return As[(i < mv ? i : mv - 1) * rsa + k * csa]; },
                     Bp + (s * tiles_n + tj) * K * NR2);
          run.add(prod);  // the block's chain: sum + this sample's product
          if ((s + 1) % kBatchBlock != 0 && s + 1 != S) continue;
          int lv = 0;
          while (depth > 0 && level[depth - 1] == lv) {
            run.add_left(entry(depth - 1), NR2);  // left + right, as PairwiseStack::push
            --depth;
            ++lv;
          }
          run.store_raw(entry(depth), NR2);
          level[depth++] = lv;
          run.zero();
        }
        // total: folded from the top (right) down, as PairwiseStack::total
        run.load(entry(depth - 1), NR2);
        for (int e = depth - 2; e >= 0; --e) run.add_left(entry(e), NR2);
        run.store(out, NR2);  // canonical NaNs
        for (int i = 0; i < mv; ++i)
          for (int j = 0; j < nv; ++j) g.C[(i0 + i) * g.ldc + jj + j] = out[i * NR2 + j];
      }
    }
  }

  static void panel(const GemmSamplesArgs<T>& a, std::int64_t j0, std::int64_t nc) {
    const GemmArgs<T>& g = a.g;
    const std::int64_t K = g.K, tiles_m = (g.M + MR - 1) / MR, tiles_n = (nc + NR - 1) / NR;
    const std::size_t tile = static_cast<std::size_t>(MR * NR), area = static_cast<std::size_t>(tiles_m * tiles_n) * tile;
    alignas(64) T kslots[UK::kChunkLevels * MR * NR];
    alignas(64) T out[MR * NR];
    T* Bp = F::bbuf().get(static_cast<std::size_t>(K * tiles_n * NR));
    T* Ap = F::abuf().get(static_cast<std::size_t>(K * MR));
    // the block's running sums, then the pairwise stack of finished blocks (level per entry)
    thread_local std::vector<T> sums;
    constexpr int kLevels = 64;  // PairwiseStack's
    int levels = 1;
    for (std::int64_t b = (a.S + kBatchBlock - 1) / kBatchBlock; b > 1; b = (b + 1) / 2) ++levels;
    sums.resize(area * static_cast<std::size_t>(levels + 1));
    T* blk = sums.data();
    int level[kLevels];
    int depth = 0;
    auto entry = [&](int e) { return sums.data() + area * static_cast<std::size_t>(e + 1); };
    const bool a_rows = g.csa == 1 && g.rsa >= 1;
    std::fill(blk, blk + area, T(0));
    for (std::int64_t s = 0; s < a.S; ++s) {
      const T* As = g.A + s * a.sa;
      F::pack_b(K, nc, g.B + s * a.sb + j0 * g.csb, g.rsb, g.csb, Bp);
      for (std::int64_t ti = 0; ti < tiles_m; ++ti) {
        const std::int64_t i0 = ti * MR;
        const int mv = static_cast<int>(g.M - i0 < MR ? g.M - i0 : MR);
        // a whole panel of A is read in place (broadcasts) when its rows or its columns are
        // contiguous: packing a column-major A's 6 x K panel value by value was a quarter of a
        // K = 32 product's time, for a panel used by one tile
        const bool direct = a_rows && mv == MR, direct_cols = !a_rows && g.rsa == 1 && mv == MR;
        if (!direct && !direct_cols) F::pack_a(mv, K, As + i0 * g.rsa, g.rsa, g.csa, Ap);
        for (std::int64_t tj = 0; tj < tiles_n; ++tj) {
          typename UK::A acc;
          const T* bpanel = Bp + tj * K * NR;
          if (direct) {
            const T* arow = As + i0 * g.rsa;
            const std::int64_t lda = g.rsa;
            UK::chunk_tree(acc, K, [arow, lda](int i, std::int64_t k) { return arow[i * lda + k]; }, bpanel, kslots);
          } else if (direct_cols) {
            const T* acol = As + i0;
            const std::int64_t csa = g.csa;
            UK::chunk_tree(acc, K, [acol, csa](int i, std::int64_t k) { return acol[k * csa + i]; }, bpanel, kslots);
          } else {
            UK::chunk_tree(acc, K, [Ap](int i, std::int64_t k) { return Ap[k * MR + i]; }, bpanel, kslots);
          }
          T* slot = blk + static_cast<std::size_t>(ti * tiles_n + tj) * tile;
          acc.add_left(slot, NR);  // the block's chain: sum + this sample's product
          acc.store_raw(slot, NR);
        }
      }
      if ((s + 1) % kBatchBlock != 0 && s + 1 != a.S) continue;
      // a finished block: merge it with the stack's entries of its level (left + right), as
      // PairwiseStack::push does, then start the next block from +0
      int lv = 0;
      while (depth > 0 && level[depth - 1] == lv) {
        const T* left = entry(depth - 1);
        for (std::size_t e = 0; e < area; ++e) blk[e] = left[e] + blk[e];
        --depth;
        ++lv;
      }
      std::copy(blk, blk + area, entry(depth));
      level[depth++] = lv;
      std::fill(blk, blk + area, T(0));
    }
    // total: folded from the top (right) down, as PairwiseStack::total
    T* tot = entry(depth - 1);
    for (int e = depth - 2; e >= 0; --e) {
      const T* left = entry(e);
      for (std::size_t x = 0; x < area; ++x) tot[x] = left[x] + tot[x];
    }
    for (std::int64_t ti = 0; ti < tiles_m; ++ti)
      for (std::int64_t tj = 0; tj < tiles_n; ++tj) {
        const T* t = tot + static_cast<std::size_t>(ti * tiles_n + tj) * tile;
        const std::int64_t i0 = ti * MR, jj = j0 + tj * NR;
        const int mv = static_cast<int>(g.M - i0 < MR ? g.M - i0 : MR), nv = static_cast<int>(j0 + nc - jj < NR ? j0 + nc - jj : NR);
        typename UK::A acc;
        acc.load(t, NR);
        acc.store(out, NR);  // canonical NaNs
        for (int i = 0; i < mv; ++i)
          for (int j = 0; j < nv; ++j) g.C[(i0 + i) * g.ldc + jj + j] = out[i * NR + j];
      }
  }
};

// Several microkernels of one code path (widest first): the one whose tiles are best filled by
// C or by C^T wins. Every variant computes every element with the same chain or tree, so the
// choice depends on the shape only and never moves a bit.
struct GemmPick {
  int index = 0;
  bool transposed = false;
};
template <class... UKs>
GemmPick gemm_pick(std::int64_t M, std::int64_t N, std::int64_t K) {
  double best = -1.0;
  GemmPick p;
  int i = 0;
  auto consider = [&](double score, bool t) {
    if (score > best) best = score, p = {i, t};
  };
  ((consider(GemmFrame<UKs>::kEff * GemmFrame<UKs>::fill(M, N), false),
    K > 0 ? consider(GemmFrame<UKs>::kEff * GemmFrame<UKs>::fill(N, M) / 1.5, true) : void(), ++i),
   ...);
  return p;
}
template <class T, class... UKs>
void gemm_multi(const GemmArgs<T>& g) {
  static_assert((std::is_same_v<T, typename UKs::T> && ...), "microkernels of another type");
  if (g.M == 0 || g.N == 0) return;
  const GemmPick p = gemm_pick<UKs...>(g.M, g.N, g.K);
  int i = 0;
  ((i++ == p.index ? (p.transposed ? GemmFrame<UKs>::run_transposed(GemmFrame<UKs>::without_packed(g)) : GemmFrame<UKs>::run_split(g)) : void()),
   ...);
}
// gemm_batch (kernels.hpp): GEMMs too small for gemm to split (below run_split's grain: an
// attention's [32, 32] x [32, 32] per head) go whole to the threads, a run of them a chunk, each
// computed as run_split computes it (one run_range over all of it) on the tile gemm_pick takes
// for the shape; the others, and those gemm computes as C^T, one after another through `gemm`.
// Which thread computes a GEMM, and after which, changes no bit.
template <class T, class... UKs>
void gemm_batch_multi(const GemmBatchArgs<T>& a, void (*gemm)(const GemmArgs<T>&)) {
  const GemmArgs<T>& g = a.g;
  if (a.count <= 0 || g.M == 0 || g.N == 0) return;
  auto nth = [&](std::int64_t i) {
    GemmArgs<T> gi = g;
    gi.A += i * a.sa, gi.B += i * a.sb, gi.C += i * a.sc;
    return gi;
  };
  const GemmPick p = gemm_pick<UKs...>(g.M, g.N, g.K);
  const std::int64_t fmas = g.M * g.N * g.K;
  if (g.Bp || !g.B || g.K == 0 || p.transposed || fmas >= kGemmGrain) {
    for (std::int64_t i = 0; i < a.count; ++i) gemm(nth(i));
    return;
  }
  int i = 0;
  ((i++ == p.index ? parallel_for(a.count, kGemmGrain / fmas, [&](std::int64_t b0, std::int64_t b1) {
     for (std::int64_t b = b0; b < b1; ++b) {
       const GemmArgs<T> gi = nth(b);
       GemmFrame<UKs>::run_range(gi, 0, gi.M, 0, gi.N, 0, gi.K, gi.C, gi.ldc, gi.bias);
     }
   })
                   : void()),
   ...);
}

template <class T, class... UKs>
GemmPacking gemm_multi_packing(std::int64_t M, std::int64_t N, std::int64_t K) {
  const GemmPick p = gemm_pick<UKs...>(M, N, K);
  GemmPacking r;
  int i = 0;
  ((i++ == p.index && !p.transposed ? void(r = GemmFrame<UKs>::packing(M, N, K)) : void()), ...);
  return r;
}
