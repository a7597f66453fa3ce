#include "dist/tree_allreduce.hpp"

#include <cstring>

#include "bitgrad/dtype.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::dist {
namespace {

Tensor add(const Tensor& a, const Tensor& b) { return kern::add_same_shape(a, b); }

// The first byte of a contiguous tensor.
char* bytes(const Tensor& t) {
  return BITGRAD_DISPATCH_FLOAT(t.dtype(), "tree_allreduce", T, [&] { return reinterpret_cast<char*>(const_cast<T*>(t.data<T>())); });
}

void copy_bytes(char* dst, const char* src, std::int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n));
}

std::int64_t seg_begin(std::int64_t len, int world, int s) { return static_cast<std::int64_t>(s) * len / world; }

}  // namespace

Tensor tree_reduce_local(const std::vector<std::vector<Range>>& nodes, std::int64_t leaves, std::vector<std::vector<Tensor>> values) {
  std::vector<Range> all;
  std::vector<Tensor> vals;
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    BITGRAD_CHECK(values[r].size() == nodes[r].size(), "tree_reduce", "rank ", r, " has ", values[r].size(), " values for ",
                  nodes[r].size(), " nodes");
    all.insert(all.end(), nodes[r].begin(), nodes[r].end());
    vals.insert(vals.end(), values[r].begin(), values[r].end());
  }
  return evaluate_tree(leaves, all, vals, add);
}

Tensor tree_allreduce(Comm& comm, const std::vector<std::vector<Range>>& nodes, std::int64_t leaves, const std::vector<Tensor>& mine,
                      std::int64_t len, DType dt, const std::string& what, std::int64_t bucket_elements) {
  const int P = comm.size(), me = comm.rank();
  BITGRAD_CHECK(static_cast<int>(nodes.size()) == P, "tree_allreduce", "a layout of ", nodes.size(), " ranks in a world of ", P);
  const std::vector<Range>& my_nodes = nodes[static_cast<std::size_t>(me)];
  BITGRAD_CHECK(mine.size() == my_nodes.size(), "tree_allreduce", "rank ", me, " has ", mine.size(), " values for ", my_nodes.size(),
                " nodes");
  for (const Tensor& t : mine)
    BITGRAD_CHECK(t.ndim() == 1 && t.is_contiguous() && t.numel() == len && t.dtype() == dt && is_floating(dt), "tree_allreduce",
                  "node values must be contiguous 1-D ", dtype_name(dt), " tensors of ", len, " elements, got ", t.shape().str(), " ",
                  dtype_name(t.dtype()));
  if (P == 1) return tree_reduce_local(nodes, leaves, {mine});
  const std::int64_t es = dtype_size(dt);
  Tensor out = Tensor::empty(Shape{len}, dt);
  char* outp = bytes(out);
  std::vector<Range> all_nodes;
  for (const auto& n : nodes) all_nodes.insert(all_nodes.end(), n.begin(), n.end());
  std::vector<Tensor> packed(static_cast<std::size_t>(P));  // per peer, my node values of its segment (several nodes only)
  std::vector<Tensor> recvbuf(static_cast<std::size_t>(P));

  const std::int64_t bucket = std::max<std::int64_t>(bucket_elements, P);
  for (std::int64_t b0 = 0; b0 < len || (b0 == 0 && len == 0); b0 += bucket) {
    const std::int64_t blen = std::min(bucket, len - b0);
    // reduce-scatter: my segment of every rank's node values
    const std::int64_t s0 = seg_begin(blen, P, me), s1 = seg_begin(blen, P, me + 1), slen = s1 - s0;
    std::vector<Tensor> vals;  // every node's value of my segment, in tree order
    std::vector<Comm::Message> sends, recvs;
    for (int r = 0; r < P; ++r) {
      const std::int64_t k = static_cast<std::int64_t>(nodes[static_cast<std::size_t>(r)].size());
      if (r == me) {  // my own values of my segment: views, no copy
        for (const Tensor& t : mine) vals.push_back(Tensor::view_of(t, Shape{slen}, Shape{1}, t.offset() + b0 + s0));
        continue;
      }
      if (k > 0) {  // rank r's k node values of my segment, one after the other
        Tensor& buf = recvbuf[static_cast<std::size_t>(r)];
        if (!buf.defined() || buf.numel() < k * slen) buf = Tensor::empty(Shape{k * slen}, dt);
        recvs.push_back({r, bytes(buf), k * slen * es});
        for (std::int64_t i = 0; i < k; ++i) vals.push_back(Tensor::view_of(buf, Shape{slen}, Shape{1}, buf.offset() + i * slen));
      }
      if (!mine.empty()) {  // my node values of rank r's segment (one node: straight from its memory)
        const std::int64_t r0 = seg_begin(blen, P, r), rl = seg_begin(blen, P, r + 1) - r0;
        if (mine.size() == 1) {
          sends.push_back({r, bytes(mine[0]) + (b0 + r0) * es, rl * es});
          continue;
        }
        const std::int64_t k_mine = static_cast<std::int64_t>(mine.size());
        Tensor& buf = packed[static_cast<std::size_t>(r)];
        if (!buf.defined() || buf.numel() < k_mine * rl) buf = Tensor::empty(Shape{k_mine * rl}, dt);
        char* p = bytes(buf);
        for (std::size_t i = 0; i < mine.size(); ++i)
          copy_bytes(p + static_cast<std::int64_t>(i) * rl * es, bytes(mine[i]) + (b0 + r0) * es, rl * es);
        sends.push_back({r, p, k_mine * rl * es});
      }
    }
    comm.exchange(sends, recvs, what + " (reduce-scatter)");
    Tensor mine_reduced = evaluate_tree(leaves, all_nodes, vals, add);
    // all-gather: my reduced segment to every rank, theirs into place
    sends.clear();
    recvs.clear();
    copy_bytes(outp + (b0 + s0) * es, bytes(mine_reduced), slen * es);
    for (int r = 0; r < P; ++r) {
      if (r == me) continue;
      const std::int64_t r0 = seg_begin(blen, P, r), r1 = seg_begin(blen, P, r + 1);
      sends.push_back({r, outp + (b0 + s0) * es, slen * es});
      recvs.push_back({r, outp + (b0 + r0) * es, (r1 - r0) * es});
    }
    comm.exchange(sends, recvs, what + " (all-gather)");
    if (len == 0) break;
  }
  return out;
}

}  // namespace bitgrad::dist
