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

Tensor tree_allreduce(Comm& comm, const std::vector<std::vector<Range>>& nodes, std::int64_t leaves, std::vector<Tensor> mine,
                      const std::string& what, std::int64_t bucket_elements) {
  const int P = comm.size(), me = comm.rank();
  BITGRAD_CHECK(static_cast<int>(nodes.size()) == P, "tree_allreduce", "a layout of ", nodes.size(), " ranks in a world of ", P);
  const std::vector<Range>& my_nodes = nodes[static_cast<std::size_t>(me)];
  BITGRAD_CHECK(mine.size() == my_nodes.size(), "tree_allreduce", "rank ", me, " has ", mine.size(), " values for ", my_nodes.size(),
                " nodes");
  if (P == 1) return tree_reduce_local(nodes, leaves, {std::move(mine)});
  // every rank learns the length and dtype from the first rank that holds a node
  std::int64_t len = -1;
  DType dt = DType::f32;
  for (const Tensor& t : mine) {
    BITGRAD_CHECK(t.ndim() == 1 && t.is_contiguous() && is_floating(t.dtype()), "tree_allreduce", "node values must be contiguous 1-D float tensors");
    BITGRAD_CHECK(len < 0 || (t.numel() == len && t.dtype() == dt), "tree_allreduce", "node values differ in length or dtype");
    len = t.numel();
    dt = t.dtype();
  }
  {
    std::string desc(sizeof(std::int64_t) + 1, '\0');
    std::memcpy(desc.data(), &len, sizeof len);
    desc[sizeof len] = static_cast<char>(dt);
    const std::vector<std::string> all = comm.allgather(desc, what + " (sizes)");
    for (const std::string& d : all) {
      std::int64_t l;
      std::memcpy(&l, d.data(), sizeof l);
      if (l < 0) continue;
      BITGRAD_CHECK(len < 0 || (l == len && static_cast<DType>(d[sizeof l]) == dt), "tree_allreduce", what,
                    ": the ranks' gradients differ in length or dtype");
      len = l;
      dt = static_cast<DType>(d[sizeof l]);
    }
  }
  BITGRAD_CHECK(len >= 0, "tree_allreduce", what, ": no rank holds a node");
  const std::int64_t es = dtype_size(dt);
  Tensor out = Tensor::empty(Shape{len}, dt);
  char* outp = bytes(out);
  std::vector<Range> all_nodes;
  for (const auto& n : nodes) all_nodes.insert(all_nodes.end(), n.begin(), n.end());

  const std::int64_t bucket = std::max<std::int64_t>(bucket_elements, P);
  for (std::int64_t b0 = 0; b0 < len || (b0 == 0 && len == 0); b0 += bucket) {
    const std::int64_t blen = std::min(bucket, len - b0);
    // reduce-scatter: my segment of every rank's node values
    const std::int64_t s0 = seg_begin(blen, P, me), s1 = seg_begin(blen, P, me + 1), slen = s1 - s0;
    std::vector<std::vector<Tensor>> seg(static_cast<std::size_t>(P));  // per rank, its node values of my segment
    std::vector<Tensor> sendbuf(static_cast<std::size_t>(P));           // per peer, my node values of its segment
    std::vector<Comm::Message> sends, recvs;
    for (int r = 0; r < P; ++r) {
      const std::size_t k = nodes[static_cast<std::size_t>(r)].size();
      if (r == me) {
        for (const Tensor& t : mine) {
          Tensor s = Tensor::empty(Shape{slen}, dt);
          copy_bytes(bytes(s), bytes(t) + (b0 + s0) * es, slen * es);
          seg[static_cast<std::size_t>(r)].push_back(s);
        }
        continue;
      }
      if (k > 0) {  // receive rank r's k node values of my segment, one after the other
        Tensor buf = Tensor::empty(Shape{static_cast<std::int64_t>(k) * slen}, dt);
        recvs.push_back({r, bytes(buf), static_cast<std::int64_t>(k) * slen * es});
        for (std::size_t i = 0; i < k; ++i) seg[static_cast<std::size_t>(r)].push_back(Tensor::view_of(buf, Shape{slen}, Shape{1}, static_cast<std::int64_t>(i) * slen));
      }
      if (!mine.empty()) {  // send my node values of rank r's segment
        const std::int64_t r0 = seg_begin(blen, P, r), r1 = seg_begin(blen, P, r + 1), rl = r1 - r0;
        Tensor buf = Tensor::empty(Shape{static_cast<std::int64_t>(mine.size()) * rl}, dt);
        char* p = bytes(buf);
        for (std::size_t i = 0; i < mine.size(); ++i)
          copy_bytes(p + static_cast<std::int64_t>(i) * rl * es, bytes(mine[i]) + (b0 + r0) * es, rl * es);
        sendbuf[static_cast<std::size_t>(r)] = buf;
        sends.push_back({r, p, static_cast<std::int64_t>(mine.size()) * rl * es});
      }
    }
    comm.exchange(sends, recvs, what + " (reduce-scatter)");
    std::vector<Tensor> vals;
    for (auto& v : seg)
      for (Tensor& t : v) vals.push_back(t);
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
