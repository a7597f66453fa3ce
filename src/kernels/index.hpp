// Index kernels: exact or order-fixed by construction, one implementation for every code
// path (no arithmetic, or sums whose order is written out below).
#pragma once

#include <cstdint>

namespace bitgrad::kern {

// For each (o, i) of x viewed [outer, L, inner]: index of the first maximum (Max) or minimum
// along L; the first NaN wins over any number; -0 and +0 are equal (the first one wins).
template <class T, bool Max = true>
void argmax_axis(const T* x, std::int64_t outer, std::int64_t L, std::int64_t inner, std::int64_t* idx);

// out viewed [outer, n, inner] = x viewed [outer, S, inner] at rows index[0..n)
template <class T>
void index_select_rows(const T* x, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                       std::int64_t n, T* out);

// The scatter-add of index_select's backward: gx[o, r, :] = sum of g[o, i, :] over the i
// with index[i] == r, in increasing i, from +0. Parallel over destination rows.
template <class T>
void index_add_rows(const T* g, std::int64_t outer, std::int64_t n, std::int64_t inner, const std::int64_t* index,
                    std::int64_t S, T* gx);

// The embedding's scatter-add, sample by sample: the n = samples * per sources are `samples`
// runs of `per` consecutive rows of g [n, inner]. gx[r, :] = the batch rule (numerics.md §3)
// over the samples of each sample's own sum of its rows with index == r (in increasing source
// order, from +0): a micro-batch of whole blocks of samples is a complete subtree (T5).
template <class T>
void index_add_rows_by_sample(const T* g, std::int64_t samples, std::int64_t per, std::int64_t inner, const std::int64_t* index,
                              std::int64_t S, T* gx);

// torch.gather along the middle axis: out[o, j, i] = x[o, index[o, j, i], i], x [outer, S, inner],
// index/out [outer, n, inner]; its backward adds g into gx at the same places, each
// destination in increasing source order (o, j, i row-major) from +0.
template <class T>
void gather_axis(const T* x, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                 std::int64_t n, T* out);
template <class T>
void gather_axis_backward(const T* g, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                          std::int64_t n, T* gx);

}  // namespace bitgrad::kern
