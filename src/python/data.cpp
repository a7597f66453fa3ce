// bitgrad.data: the datasets, Python datasets, and the worker loader. A batch is a pure function
// of (dataset, seed, epoch, index): loader threads and workers decide who builds it, never what
// is in it — also when the samples come from Python code (each sample is asked for by its id,
// under the GIL, and written to its own rows).
#include <pybind11/numpy.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// Python datasets and interpreter shutdown: a loader's threads may be inside a dataset's
// __getitem__ (with the GIL released by a sleep or I/O) when the interpreter exits, and a
// thread that comes back for the GIL then is ended by the interpreter. So at exit (atexit)
// no new call starts, and the calls under way are waited for.
std::atomic<bool> g_closing{false};
std::atomic<int> g_in_flight{0};
struct InFlight {
  InFlight() { ++g_in_flight; }
  ~InFlight() { --g_in_flight; }
};
void close_python_datasets() {
  g_closing = true;
  py::gil_scoped_release release;
  for (int i = 0; i < 10000 && g_in_flight.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// A dataset written in Python: any object with __len__ and __getitem__(i) -> (x, y), x array-like
// of sample_shape (converted to float32), y an int label (classification) or array-like of
// target_shape. The object is held (and released) under the GIL.
class PythonDataset : public data::Dataset {
 public:
  PythonDataset(py::object obj, Shape sample, std::int64_t classes, Shape target)
      : obj_(new py::object(std::move(obj))), sample_(sample), classes_(classes), target_(target) {
    n_ = static_cast<std::int64_t>(py::len(*obj_));
    name_ = py::str(py::type::of(*obj_).attr("__name__"));
  }
  ~PythonDataset() override {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    const PyGILState_STATE s = PyGILState_Ensure();
    delete obj_;
    PyGILState_Release(s);
  }
  std::int64_t size() const override { return n_; }
  Shape sample_shape() const override { return sample_; }
  std::int64_t num_classes() const override { return classes_; }
  Shape target_shape() const override { return target_; }
  std::string describe() const override {
    return "Python dataset " + name_ + " (" + std::to_string(n_) + " samples of " + sample_.str() + ")";
  }
  void get(std::int64_t i, float* x, std::int64_t* label, float* y) const override {
    // a loader thread building ahead while the interpreter shuts down: nobody reads the batch
    const InFlight in_flight;
    if (g_closing || _Py_IsFinalizing()) throw Error("dataset " + name_ + ": the Python interpreter is shutting down");
    py::gil_scoped_acquire gil;
    try {
      py::object item = (*obj_)[py::int_(i)];
      if (!py::isinstance<py::tuple>(item) || py::len(item) != 2)
        throw Error("dataset " + name_ + ": item " + std::to_string(i) + " is not a pair (x, y)");
      py::tuple xy = item.cast<py::tuple>();
      auto xs = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(xy[0]);
      if (!xs) throw Error("dataset " + name_ + ": sample " + std::to_string(i) + "'s x is not convertible to float32 values");
      BITGRAD_CHECK(static_cast<std::int64_t>(xs.size()) == sample_.numel(), "dataset", name_, ": sample ", i, "'s x has ", xs.size(),
                    " values; the dataset's sample shape ", sample_.str(), " has ", sample_.numel());
      std::copy(xs.data(), xs.data() + xs.size(), x);
      if (classes_ > 0) {
        if (target_.numel() == 1 && target_.ndim() == 0) {
          const std::int64_t l = xy[1].cast<std::int64_t>();
          BITGRAD_CHECK(l >= 0 && l < classes_, "dataset", name_, ": sample ", i, " has label ", l, "; expected [0, ", classes_, ")");
          *label = l;
        } else {
          auto ls = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(xy[1]);
          BITGRAD_CHECK(ls && static_cast<std::int64_t>(ls.size()) == target_.numel(), "dataset", name_, ": sample ", i,
                        "'s labels are not ", target_.numel(), " integers");
          std::copy(ls.data(), ls.data() + ls.size(), label);
        }
      } else {
        auto ys = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(xy[1]);
        BITGRAD_CHECK(ys && static_cast<std::int64_t>(ys.size()) == target_.numel(), "dataset", name_, ": sample ", i, "'s target is not ",
                      target_.numel(), " numbers");
        std::copy(ys.data(), ys.data() + ys.size(), y);
      }
    } catch (py::error_already_set& e) {
      throw Error("dataset " + name_ + ": item " + std::to_string(i) + " raised " + e.what());
    } catch (const py::cast_error& e) {
      throw Error("dataset " + name_ + ": item " + std::to_string(i) + ": " + e.what());
    }
  }

 private:
  py::object* obj_;
  std::int64_t n_ = 0;
  Shape sample_;
  std::int64_t classes_;
  Shape target_;
  std::string name_;
};

py::object batch_y(const data::Batch& b) { return py::cast(b.y); }

}  // namespace

void init_data(py::module_& top) {
  py::module_ m = top.def_submodule("data", "Datasets and the deterministic worker loader.");
  py::module_::import("atexit").attr("register")(py::cpp_function(&close_python_datasets));

  py::class_<data::Dataset, std::shared_ptr<data::Dataset>>(m, "Dataset", "A dataset: samples by id.")
      .def("__len__", &data::Dataset::size)
      .def_property_readonly("sample_shape", [](const data::Dataset& d) { return py::tuple(py::cast(d.sample_shape().vec())); })
      .def_property_readonly("num_classes", &data::Dataset::num_classes)
      .def_property_readonly("target_shape", [](const data::Dataset& d) { return py::tuple(py::cast(d.target_shape().vec())); })
      .def("__getitem__", [](const data::Dataset& d, std::int64_t i) {
        if (i < 0) i += d.size();
        if (i < 0 || i >= d.size()) throw py::index_error("dataset index out of range");
        Tensor x = Tensor::empty(d.sample_shape());
        Tensor y = d.num_classes() > 0 ? Tensor::empty(d.target_shape(), DType::i64) : Tensor::empty(d.target_shape());
        nogil([&] {
          d.get(i, x.mutable_data<float>(), d.num_classes() > 0 ? y.mutable_data<std::int64_t>() : nullptr,
                d.num_classes() > 0 ? nullptr : y.mutable_data<float>());
        });
        if (d.num_classes() > 0 && d.target_shape().ndim() == 0) return py::make_tuple(x, py::int_(static_cast<std::int64_t>(y.item())));
        return py::make_tuple(x, y);
      }, py::arg("i"), "(x, y) of sample i: y an int label (classification) or a tensor.")
      .def("__repr__", &data::Dataset::describe);

  m.def("fashion_mnist", [](bool train, const std::string& dir, bool normalize) { return data::fashion_mnist(dir, train, normalize); },
        py::arg("train") = true, py::arg("dir") = data::kFashionMnistDir, py::arg("normalize") = true,
        "Fashion-MNIST from Debian's dataset-fashion-mnist: samples [1, 28, 28], 10 classes.");
  m.def("csv", &data::csv_dataset, py::arg("path"), py::arg("header") = false, py::arg("label_column") = -1, py::arg("targets") = 1,
        py::arg("allow_nonfinite") = false, "Numbers separated by commas, one sample per line (a class column, or the last `targets` columns).");
  m.def("adder", &data::adder_dataset, py::arg("n"), py::arg("features"), py::arg("seed"), py::arg("first") = 0,
        "The adder regression: features uniform in [0, 1), the target their sum.");
  m.def("synthetic", [](std::int64_t n, const std::vector<std::int64_t>& shape, std::int64_t classes, std::int64_t targets, std::uint64_t seed) {
    return data::synthetic_dataset(n, to_shape(shape, "synthetic"), classes, targets, seed);
  }, py::arg("n"), py::arg("sample_shape"), py::arg("classes") = 10, py::arg("targets") = 1, py::arg("seed") = 0,
        "Normal(0, 1) samples keyed by id; labels (classes > 0) or uniform targets.");
  m.def("text", [](const std::string& path, std::int64_t block_size, bool train, bool bytes, double val_fraction, std::int64_t max_windows) {
    auto corpus = data::load_text(path, bytes, val_fraction);
    return data::text_windows(corpus, block_size, train, max_windows);
  }, py::arg("path"), py::arg("block_size"), py::arg("train") = true, py::arg("bytes") = false, py::arg("val_fraction") = 0.1,
        py::arg("max_windows") = 0, "Windows of a text corpus (a UTF-8 file or a directory of them): x token ids, y the next tokens.");
  m.def("from_python", [](py::object obj, const std::vector<std::int64_t>& sample_shape, std::int64_t num_classes,
                          const std::vector<std::int64_t>& target_shape) -> std::shared_ptr<data::Dataset> {
    if (!py::hasattr(obj, "__len__") || !py::hasattr(obj, "__getitem__"))
      throw py::type_error("from_python: a dataset needs __len__ and __getitem__");
    return std::make_shared<PythonDataset>(std::move(obj), to_shape(sample_shape, "from_python"), num_classes, to_shape(target_shape, "from_python"));
  }, py::arg("dataset"), py::arg("sample_shape"), py::arg("num_classes") = 0, py::arg("target_shape") = std::vector<std::int64_t>{},
        "A dataset written in Python: dataset[i] -> (x, y). Each sample is asked for by its id, so the batches are the same for "
        "any number of workers and threads whatever the timing — as long as dataset[i] depends on i alone.");

  py::class_<data::Batch>(m, "Batch", "A batch: x, y and its position (epoch, index).")
      .def_readonly("x", &data::Batch::x)
      .def_property_readonly("y", &batch_y)
      .def_readonly("epoch", &data::Batch::epoch)
      .def_readonly("index", &data::Batch::index)
      .def_readonly("rows", &data::Batch::rows)
      .def("__iter__", [](const data::Batch& b) { return py::iter(py::make_tuple(b.x, b.y)); })
      .def("__repr__", [](const data::Batch& b) {
        return "Batch(epoch=" + std::to_string(b.epoch) + ", index=" + std::to_string(b.index) + ", x=" + b.x.shape().str() +
               ", y=" + b.y.shape().str() + ")";
      });

  py::class_<data::DataLoader, std::shared_ptr<data::DataLoader>>(m, "DataLoader",
                               "Batches in the canonical order: the epoch's permutation is bitgrad's Fisher-Yates on (seed, 'shuffle')"
                               ".sub(epoch); workers build batches ahead and are handed them in order.")
      .def(py::init([](std::shared_ptr<data::Dataset> ds, std::int64_t batch_size, bool shuffle, bool drop_last, int workers, int prefetch,
                       std::uint64_t seed, int crop_padding, bool hflip) {
             return without_gil_on_delete(
                 new data::DataLoader(std::move(ds), loader_options(batch_size, shuffle, drop_last, workers, prefetch, seed, crop_padding, hflip)));
           }),
           py::arg("dataset"), py::arg("batch_size") = 64, py::kw_only(), py::arg("shuffle") = true, py::arg("drop_last") = true,
           py::arg("workers") = 0, py::arg("prefetch") = 4, py::arg("seed") = 0, py::arg("crop_padding") = 0, py::arg("hflip") = false)
      .def("next", [](data::DataLoader& l) { return nogil([&] { return l.next(); }); },
           "The next batch; after an epoch's last batch comes batch 0 of the next epoch.")
      .def("seek", [](data::DataLoader& l, std::int64_t epoch, std::int64_t index) { nogil([&] { l.seek(epoch, index); }); },
           py::arg("epoch"), py::arg("index"))
      .def_property_readonly("epoch", &data::DataLoader::epoch)
      .def_property_readonly("index", &data::DataLoader::index)
      .def("__len__", &data::DataLoader::batches_per_epoch, "Batches per epoch.");
}

}  // namespace bitgrad::python
