#include "train/batch_gather.hpp"

#include <cstring>
#include <string>

#include "bitgrad/error.hpp"
#include <vector>

namespace bitgrad::train {

void gather_batch_on_root(dist::Comm& comm, const dist::StepLayout& layout, data::Batch& b) {
  auto row_bytes = [](const Tensor& t) -> std::int64_t {
    return t.shape()[0] > 0 ? t.numel() / t.shape()[0] * static_cast<std::int64_t>(dtype_size(t.dtype())) : 0;
  };
  auto raw = [](const Tensor& t) -> char* {  // the first byte of a contiguous batch tensor
    switch (t.dtype()) {
      case DType::i64: return reinterpret_cast<char*>(const_cast<std::int64_t*>(t.data<std::int64_t>()));
      case DType::f64: return reinterpret_cast<char*>(const_cast<double*>(t.data<double>()));
      case DType::f32: return reinterpret_cast<char*>(const_cast<float*>(t.data<float>()));
      default: throw Error(std::string("train: cannot gather a batch tensor of dtype ") + dtype_name(t.dtype()));
    }
  };
  std::vector<dist::Comm::Message> sends, recvs;
  Tensor x = b.x, y = b.y;
  if (comm.root()) {
    Shape xs = b.x.shape(), ys = b.y.shape();
    xs[0] = layout.rows;
    ys[0] = layout.rows;
    x = Tensor::empty(xs, b.x.dtype());
    y = Tensor::empty(ys, b.y.dtype());
    const std::int64_t xrow = x.numel() / layout.rows * static_cast<std::int64_t>(dtype_size(x.dtype())),
                       yrow = y.numel() / layout.rows * static_cast<std::int64_t>(dtype_size(y.dtype()));
    for (int r = 0; r < comm.size(); ++r) {
      const dist::Range rows = layout.rows_of(r);
      if (rows.size() == 0) continue;
      if (r == 0) {
        std::memcpy(raw(x), raw(b.x), static_cast<std::size_t>(rows.size() * xrow));
        std::memcpy(raw(y), raw(b.y), static_cast<std::size_t>(rows.size() * yrow));
        continue;
      }
      recvs.push_back({r, raw(x) + rows.begin * xrow, rows.size() * xrow});
      recvs.push_back({r, raw(y) + rows.begin * yrow, rows.size() * yrow});
    }
  } else if (b.x.shape()[0] > 0) {
    sends.push_back({0, raw(b.x), b.x.shape()[0] * row_bytes(b.x)});
    sends.push_back({0, raw(b.y), b.y.shape()[0] * row_bytes(b.y)});
  }
  comm.exchange(sends, recvs, "the batch's inputs to rank 0");
  if (comm.root()) {
    b.x = x;
    b.y = y;
    b.first = 0;
  }
}

Tensor gather_labels(dist::Comm& comm, const dist::StepLayout& layout, const Tensor& y) {
  BITGRAD_CHECK(y.dtype() == DType::i64, "train", "gathering labels of dtype ", dtype_name(y.dtype()));
  const std::vector<std::int64_t> mine = y.to_vector<std::int64_t>();
  const std::vector<std::string> all =
      comm.allgather(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(std::int64_t)), "the batch's labels");
  Shape shape = y.shape();
  shape[0] = layout.rows;
  const std::int64_t per_row = layout.rows ? shape.numel() / layout.rows : 0;
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape.numel()));
  for (int r = 0; r < comm.size(); ++r) {  // rank r's labels at its rows
    const dist::Range rows = layout.rows_of(r);
    const std::string& s = all[static_cast<std::size_t>(r)];
    BITGRAD_CHECK(static_cast<std::int64_t>(s.size()) == rows.size() * per_row * 8, "train", "rank ", r, " sent ", s.size() / 8, " labels for ",
                  rows.size(), " rows");
    if (!s.empty()) std::memcpy(v.data() + rows.begin * per_row, s.data(), s.size());
  }
  return Tensor::from<std::int64_t>(v, shape);
}

}  // namespace bitgrad::train
