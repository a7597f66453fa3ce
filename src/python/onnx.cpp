// bitgrad.onnx (docs/onnx.md "Bring your PyTorch model"): ONNX models as bitgrad
// modules. load() gives an onnx::GraphModule, an nn.Module whose parameters are the graph's float
// initializers under their names.
#include <limits>

#include "bitgrad/io.hpp"
#include "bitgrad/onnx.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {

void init_onnx(py::module_& top) {
  py::module_ m = top.def_submodule("onnx", "ONNX models as bitgrad modules: load, run, train, write back (docs/onnx.md).");
  py::class_<onnx::GraphModule, nn::Module, std::shared_ptr<onnx::GraphModule>>(
      m, "GraphModule",
      "An ONNX graph run with bitgrad's ops: parameters are its float initializers by name (PyTorch's state_dict keys), "
      "buffers BatchNormalization's running statistics.")
      .def("run", [](onnx::GraphModule& g, const std::vector<Tensor>& inputs, const std::optional<nn::Context>& ctx) {
             const nn::Context c = ctx ? *ctx : nn::Context{};
             return nogil([&] { return g.run(inputs, c); });
           }, py::arg("inputs"), py::arg("ctx") = py::none(), "Every input in the graph's order -> every output.")
      .def_property_readonly("input_names", &onnx::GraphModule::input_names)
      .def_property_readonly("output_names", &onnx::GraphModule::output_names)
      .def_property_readonly("node_count", &onnx::GraphModule::node_count, "Nodes run per forward.")
      .def_property_readonly("folded_count", &onnx::GraphModule::folded_count, "Nodes folded to constants at load.")
      .def_property_readonly("opset", &onnx::GraphModule::opset)
      .def("runs_op", &onnx::GraphModule::runs_op, py::arg("op_type"), "Whether a node of this op type runs per forward (not folded at load).")
      .def_property_readonly("training_semantics", &onnx::GraphModule::training_semantics,
                             "load(training=True): Dropout and BatchNormalization follow the context's mode.")
      .def("input_shape", [](const onnx::GraphModule& g, std::size_t i) {
        py::list l;
        for (const std::int64_t d : g.input_dims(i)) l.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
        return py::tuple(l);
      }, py::arg("i") = 0, "The declared shape of input i (None where symbolic).")
      .def("samples", [](const onnx::GraphModule& g, const std::optional<std::vector<std::int64_t>>& shape) {
        const onnx::SampleAnalysis a = nogil([&] { return shape ? g.samples(Shape(*shape)) : g.samples(); });
        py::dict d;
        d["mode"] = onnx::SampleAnalysis::mode_name(a.mode);
        d["node"] = a.node;
        d["why"] = a.why;
        d["batch_statistics"] = a.batch_statistics;
        d["output_on_axis0"] = a.output_on_axis0;
        d["output"] = a.output;
        return d;
      }, py::arg("shape") = py::none(),
           "Where the samples of an input of this shape (samples on axis 0, at least 2; default: the latest forward's input, or the "
           "declared one, at 3 samples) go: a dict with mode 'batch_rule' (micro-batches and "
           "ranks give the whole batch's bits), 'per_block' (they do when every 32-sample block is its own forward and backward, as "
           "bitgrad.accumulate and the CLI run it) or 'mixes_samples' (a node combines samples: micro-batches refused), the node that "
           "decided it and why (docs/contract.md).")
      .def("input_type", &onnx::GraphModule::input_type, py::arg("i") = 0, "The ONNX element type of input i ('float', 'int64').")
      .def("save", [](const onnx::GraphModule& g, const std::string& path) {
        const std::string bytes = nogil([&] { return g.to_onnx_bytes(); });
        io::write_file_atomic(path, bytes);
      }, py::arg("path"), "Writes the model as ONNX with the current parameters and buffers as its initializers.");
  m.def("load", [](const std::string& path, bool training, double memory_bytes) {
    BITGRAD_CHECK(memory_bytes >= 0 && memory_bytes < std::numeric_limits<double>::infinity(), "onnx.load",
                  "memory_bytes must be a finite number of bytes >= 0 (0: the memory available), got ", memory_bytes);
    onnx::LoadOptions o;
    o.training = training;
    o.memory_bytes = memory_bytes;
    return nogil([&] { return onnx::load(path, o); });
  }, py::arg("path"), py::arg("training") = true, py::arg("memory_bytes") = 0.0,
        "An ONNX file (opsets 13-17) as a module. training=True: Dropout and BatchNormalization follow ctx.training; False: always "
        "evaluation semantics. Anything bitgrad lacks is one error naming the op type, the node and what is missing. The import's "
        "storage held at once (initializers, constants folded at load, the load-time forward at the declared input shape) is "
        "bounded by memory_bytes (0: the memory the system has available), checked before each allocation.");
  m.def("op_types", &onnx::op_types, "The ONNX op types the importer runs.");
}

}  // namespace bitgrad::python
