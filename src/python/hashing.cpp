// The recorder's hashing (bitgrad.torch): groups of NumPy arrays (views of torch tensors) and
// tensors hashed as fingerprint(group), in one call, on the calling thread without the GIL. A
// C-contiguous array of a bitgrad dtype is read in place: no tensor is made for it. (A helper
// thread hashing beside the recorder's Python work measured slower: docs/benchmarks.md.)
#include <pybind11/numpy.h>
#include <unistd.h>

#include <cerrno>

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

// One group of a Python call (group number `at`, for the error), and the objects it reads (kept
// alive while the GIL is released).
std::vector<HashItem> read_group(const char* fn, std::size_t at, py::handle g, std::vector<py::object>& keep) {
  BITGRAD_CHECK(py::isinstance<py::sequence>(g) && !py::isinstance<py::str>(g), fn, "group ", at,
                ": expected a list of tensors or numpy arrays, got ", std::string(py::str(py::type::of(g).attr("__name__"))));
  std::vector<HashItem> items;
  // each item held as an object: a sequence may make its items on access (an array's rows),
  // and the item must live while the GIL is released
  for (const py::object x : g.cast<py::sequence>()) {
    items.emplace_back();
    if (!numpy_in_place(x, items.back())) items.back().tensor = py::isinstance<Tensor>(x) ? x.cast<Tensor>() : from_numpy(x);
    keep.push_back(x);
  }
  return items;
}

Groups read_groups(const py::sequence& groups, std::vector<py::object>& keep) {
  Groups gs;
  gs.reserve(py::len(groups));
  for (const py::object g : groups) gs.push_back(read_group("_fingerprints", gs.size(), g, keep));
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

// _hashed_line's values: a str stays as it is (its UTF-8), a group is replaced by its digest.
struct LineValue {
  std::string text;
  bool hashed = false;
  std::size_t group = 0;
};

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
  // A recorded step's trace line in one call: its JSON text around the values, the groups hashed
  // and the line written without the GIL (the recorder's record encoded without a dict,
  // json.dumps, a hash call and a write loop in Python).
  m.def("_hashed_line", [](const py::sequence& pieces, const py::sequence& values, int fd, std::int64_t size) -> py::object {
    const std::size_t n = py::len(values);
    BITGRAD_CHECK(py::len(pieces) == n + 1, "_hashed_line", "expected one more piece than values, got ", py::len(pieces),
                  " pieces and ", n, " values");
    std::vector<py::object> keep;
    Groups gs;
    std::vector<LineValue> vs(n);
    for (std::size_t i = 0; i < n; ++i) {
      const py::object v = values[i];
      if (py::isinstance<py::str>(v)) {
        vs[i].text = v.cast<std::string>();
      } else {
        vs[i].hashed = true;
        vs[i].group = gs.size();
        gs.push_back(read_group("_hashed_line", i, v, keep));
      }
    }
    std::vector<std::string> ps(n + 1);
    for (std::size_t i = 0; i <= n; ++i) {
      const py::object p = pieces[i];
      BITGRAD_CHECK(py::isinstance<py::str>(p), "_hashed_line", "piece ", i, ": expected a str, got ",
                    std::string(py::str(py::type::of(p).attr("__name__"))));
      ps[i] = p.cast<std::string>();
    }
    int error = 0;
    const std::string line = nogil([&] {
      std::string out = ps[0];
      for (std::size_t i = 0; i < n; ++i) {
        out += vs[i].hashed ? hash_group(gs[vs[i].group]).hex() : vs[i].text;
        out += ps[i + 1];
      }
      if (fd < 0) return out;
      // one line per write(2) on an O_APPEND descriptor; a write cut short is taken back
      // (truncated to `size`), so the file stays a sequence of complete lines
      out += '\n';
      std::size_t done = 0;
      while (done < out.size()) {
        const ssize_t w = ::write(fd, out.data() + done, out.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          error = w < 0 ? errno : EIO;
          if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
            // the error that stopped the write is the one to report
          }
          break;
        }
        done += static_cast<std::size_t>(w);
      }
      return out;
    });
    if (fd < 0) return py::str(line);
    if (error != 0) {
      errno = error;
      PyErr_SetFromErrno(PyExc_OSError);
      throw py::error_already_set();
    }
    return py::int_(line.size());
  }, py::arg("pieces"), py::arg("values"), py::arg("fd") = -1, py::arg("size") = 0,
        "pieces[0] + v[0] + pieces[1] + ... + pieces[n]: each value a str as it is or a group (a list of tensors or numpy arrays) "
        "as its fingerprint's 32 hex digits, the GIL released while hashing. With fd: the line and a newline written to it in "
        "one write(2) where it can (the file truncated back to `size` if the write fails: OSError), and its byte count returned.");
}

}  // namespace bitgrad::python
