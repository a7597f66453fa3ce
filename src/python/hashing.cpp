// The recorder's hashing (bitgrad.torch): groups of NumPy arrays (views of torch tensors) and
// tensors hashed as fingerprint(group), in one call, on the calling thread without the GIL. A
// C-contiguous array of a bitgrad dtype is read in place: no tensor is made for it. (A helper
// thread hashing beside the recorder's Python work measured slower: docs/benchmarks.md.)
#include <pybind11/numpy.h>

#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// One item of a group: an array read in place (its header from the array's own fields, what
// fingerprint(from_numpy(a)) hashes), or a tensor.
struct HashItem {
  Tensor tensor;
  DType dtype = DType::f32;
  std::int64_t dims[kMaxDims] = {};
  int ndim = 0;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

using Groups = std::vector<std::vector<HashItem>>;

// Fills `item` from a NumPy array that can be hashed in place; false for anything else (a
// tensor, a strided or big-endian array, a dtype bitgrad lacks: from_numpy decides, or refuses).
bool numpy_in_place(py::handle x, HashItem& item) {
  if (!py::isinstance<py::array>(x)) return false;
  const auto* a = py::detail::array_proxy(x.ptr());
  const auto* d = py::detail::array_descriptor_proxy(a->descr);
  if (!(a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) || d->byteorder == '>' || a->nd > kMaxDims) return false;
  if (!dtype_of_numpy(d->kind, d->elsize, item.dtype)) return false;
  std::size_t n = 1;
  for (int i = 0; i < a->nd; ++i) {
    item.dims[i] = a->dimensions[i];
    n *= static_cast<std::size_t>(a->dimensions[i]);  // NumPy has checked the product
  }
  item.ndim = a->nd;
  item.data = a->data;
  item.bytes = n * static_cast<std::size_t>(d->elsize);
  return true;
}

// The groups of a Python call, and the objects they read (kept alive while the GIL is released).
Groups read_groups(const py::sequence& groups, std::vector<py::object>& keep) {
  Groups gs;
  gs.reserve(py::len(groups));
  for (const py::handle g : groups) {
    BITGRAD_CHECK(py::isinstance<py::sequence>(g) && !py::isinstance<py::str>(g), "_fingerprints", "group ", gs.size(),
                  ": expected a list of tensors or numpy arrays, got ", std::string(py::str(py::type::of(g).attr("__name__"))));
    std::vector<HashItem> items;
    for (const py::handle x : g.cast<py::sequence>()) {
      items.emplace_back();
      if (!numpy_in_place(x, items.back()))
        items.back().tensor = py::isinstance<Tensor>(x) ? x.cast<Tensor>() : from_numpy(py::reinterpret_borrow<py::object>(x));
      keep.push_back(py::reinterpret_borrow<py::object>(x));
    }
    gs.push_back(std::move(items));
  }
  return gs;
}

Digest128 hash_group(const std::vector<HashItem>& items) {
  Fingerprint f;
  for (const HashItem& it : items) {
    if (it.tensor.defined()) {
      f.add(it.tensor);
    } else {
      f.add_header(it.dtype, it.dims, it.ndim);
      f.add_bytes(it.data, it.bytes);
    }
  }
  return f.digest();
}

py::list hex_list(const std::vector<Digest128>& ds) {
  py::list out;
  for (const Digest128& d : ds) out.append(d.hex());
  return out;
}

}  // namespace

void init_hashing(py::module_& m) {
  m.def("_fingerprints", [](const py::sequence& groups) {
    std::vector<py::object> keep;
    const Groups gs = read_groups(groups, keep);
    const std::vector<Digest128> ds = nogil([&] {
      std::vector<Digest128> out;
      out.reserve(gs.size());
      for (const std::vector<HashItem>& items : gs) out.push_back(hash_group(items));
      return out;
    });
    return hex_list(ds);
  }, py::arg("groups"), "fingerprint(g) of each group g (a list of tensors or numpy arrays), in one call; the GIL is released while hashing.");
}

}  // namespace bitgrad::python
