// bitgrad._bitgrad.distributed: data parallel and gradient accumulation for a training loop
// written in Python (docs/python.md "Gradient accumulation" and "Data parallel"). The
// C++ pieces of bitgrad/dist.hpp — MPI started as the CLI starts it, the step's plan over the
// ranks, the gradient combine by the canonical tree, bytes exchanged between ranks — and a
// loader that builds only this rank's shard of each batch. The Python package
// (bitgrad/distributed.py, bitgrad/_accumulate.py) builds the user-facing objects on these.
#include "bitgrad/dist.hpp"
#include "bitgrad/io.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

py::list rows_list(const std::vector<dist::StepPlan::Rows>& rs) {
  py::list l;
  for (const auto& [b, e] : rs) l.append(py::make_tuple(b, e));
  return l;
}

std::vector<Tensor> tensor_list(const py::iterable& params) {
  std::vector<Tensor> out;
  for (py::handle h : params) {
    if (!py::isinstance<Tensor>(h))
      throw py::type_error("GradientCombiner: expected bitgrad.Tensor parameters, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
    out.push_back(h.cast<Tensor>());
  }
  return out;
}

}  // namespace

void init_distributed(py::module_& top) {
  py::module_ m = top.def_submodule("distributed", "MPI ranks, the step's plan and the tree gradient combine (bitgrad/dist.hpp).");
  m.def("init", [] { return dist::init(); },
        "Starts MPI when launched by mpirun (as `bitgrad train` does) and returns the world size; 1 otherwise. Idempotent.");
  m.def("initialized", &dist::initialized, "Whether MPI was started in this process.");
  m.def("launched_by_mpirun", &dist::launched_by_mpirun, "Whether mpirun started this process with more than one rank (starts nothing).");
  m.def("have_mpi", &dist::have_mpi, "Whether this bitgrad was built with MPI.");
  m.def("world_size", &dist::world_size, "Ranks in the job (1 without mpirun); starts MPI under mpirun.");
  m.def("rank", &dist::world_rank, "This process's rank (0 without mpirun); starts MPI under mpirun.");
  m.def("host_name", &dist::host_name);
  m.def("finalize", &dist::finalize, "Leaves MPI (once; a no-op without it). bitgrad.distributed calls it at exit.");
  m.def("abort", &dist::abort_job, py::arg("code"), "Ends every rank of the job with this exit code (MPI_Abort); returns with one rank.");
  m.def("set_timeout", &dist::set_timeout, py::arg("seconds"), "Seconds a rank waits for the others before an error names the wait.");
  m.def("allgather_bytes", [](const py::bytes& mine, const std::string& what) {
    std::string s = mine;
    const std::vector<std::string> got = nogil([&] { return dist::allgather_bytes(s, what); });
    py::list out;
    for (const std::string& g : got) out.append(py::bytes(g));
    return out;
  }, py::arg("data"), py::arg("what") = "allgather_bytes", "Every rank's bytes, in rank order (collective: every rank calls it).");
  m.def("broadcast_bytes", [](const py::object& data, int root, const std::string& what) {
    std::string s = data.is_none() ? std::string() : std::string(data.cast<py::bytes>());
    nogil([&] { dist::broadcast_bytes(s, root, what); });
    return py::bytes(s);
  }, py::arg("data"), py::arg("root") = 0, py::arg("what") = "broadcast_bytes",
        "Rank root's bytes on every rank (collective; the others may pass None).");

  py::class_<dist::StepPlan>(m, "StepPlan",
                             "One step's plan over the ranks (numerics.md §20): the batch's tree leaves, this rank's shard of the "
                             "samples, and the forward/backward pieces of each of its tree nodes.")
      .def_readonly("rows", &dist::StepPlan::rows)
      .def_readonly("leaf_rows", &dist::StepPlan::leaf_rows)
      .def_readonly("leaves", &dist::StepPlan::leaves)
      .def_readonly("world", &dist::StepPlan::world)
      .def_readonly("rank", &dist::StepPlan::rank)
      .def_readonly("whole_batch", &dist::StepPlan::whole_batch)
      .def_property_readonly("shard", [](const dist::StepPlan& p) { return py::make_tuple(p.shard.first, p.shard.second); })
      .def_property_readonly("rank_nodes", [](const dist::StepPlan& p) {
        py::list l;
        for (const auto& n : p.rank_nodes) l.append(rows_list(n));
        return l;
      })
      .def_property_readonly("pieces", [](const dist::StepPlan& p) {
        py::list l;
        for (const auto& n : p.pieces) l.append(rows_list(n));
        return l;
      })
      .def("__repr__", [](const dist::StepPlan& p) {
        return "StepPlan(rows=" + std::to_string(p.rows) + ", leaves=" + std::to_string(p.leaves) + " of " + std::to_string(p.leaf_rows) +
               ", rank " + std::to_string(p.rank) + " of " + std::to_string(p.world) + ", shard [" + std::to_string(p.shard.first) + ", " +
               std::to_string(p.shard.second) + "), whole_batch=" + (p.whole_batch ? "True" : "False") + ")";
      });
  m.def("plan_step", &dist::plan_step, py::arg("rows"), py::arg("batch_size"), py::arg("accumulate"), py::arg("world"), py::arg("rank"),
        py::arg("per_block") = false);
  m.def("plan_micro_batches", &dist::plan_micro_batches, py::arg("sizes"));
  m.def("plan_problem", &dist::plan_problem, py::arg("batch_size"), py::arg("accumulate"), py::arg("world"),
        "Why a batch cannot be split over world ranks ('': it can).");
  m.def("leaf_rows", &dist::leaf_rows, py::arg("batch_size"), py::arg("accumulate"));

  py::class_<dist::GradientCombiner, std::shared_ptr<dist::GradientCombiner>>(
      m, "GradientCombiner",
      "The training step's gradient combine: each piece's backward of S / divisor, the pieces of a tree node combined by the "
      "pairwise tree, the nodes of every rank by the tree above them; .grad holds the batch's gradient on every rank.")
      .def(py::init([](const py::iterable& params) { return std::make_shared<dist::GradientCombiner>(tensor_list(params)); }),
           py::arg("params"))
      .def("backward", [](dist::GradientCombiner& c, const Tensor& loss_sum, double divisor, std::int64_t rows) {
        nogil([&] { c.backward(loss_sum, divisor, rows); });
      }, py::arg("loss_sum"), py::arg("divisor"), py::arg("rows") = 0)
      .def_property_readonly("sample_mismatch", &dist::GradientCombiner::sample_mismatch,
                             "The step's first sum over samples that was not the batch rule over its piece's samples (\"\" when none).")
      .def("end_node", &dist::GradientCombiner::end_node)
      .def("finish", [](dist::GradientCombiner& c, const dist::StepPlan& plan) { return nogil([&] { return c.finish(plan); }); },
           py::arg("plan"))
      .def("reset", &dist::GradientCombiner::reset)
      .def_property("per_block", &dist::GradientCombiner::per_block, &dist::GradientCombiner::set_per_block,
                    "Pieces that are an imported graph's 32-sample blocks (numerics.md §42): a piece's uses of a parameter added "
                    "before the tree, not kept apart (set between steps)")
      .def_property_readonly("pieces", &dist::GradientCombiner::pieces)
      .def_property_readonly("nodes", &dist::GradientCombiner::nodes);

  // a loader of this rank's shard of every batch (data::LoaderOptions world, rank, leaf_rows)
  m.def("_loader", [](std::shared_ptr<data::Dataset> ds, std::int64_t batch_size, bool shuffle, bool drop_last, int workers, int prefetch,
                      std::uint64_t seed, int crop_padding, bool hflip, int world, int rank, std::int64_t leaf_rows) {
    data::LoaderOptions o = loader_options(batch_size, shuffle, drop_last, workers, prefetch, seed, crop_padding, hflip);
    o.world = world;
    o.rank = rank;
    o.leaf_rows = leaf_rows;
    return without_gil_on_delete(new data::DataLoader(std::move(ds), o));
  }, py::arg("dataset"), py::arg("batch_size"), py::arg("shuffle"), py::arg("drop_last"), py::arg("workers"), py::arg("prefetch"),
        py::arg("seed"), py::arg("crop_padding"), py::arg("hflip"), py::arg("world"), py::arg("rank"), py::arg("leaf_rows"));
  // the first row of a (sharded) batch's x within the whole batch
  py::reinterpret_borrow<py::class_<data::Batch>>(py::type::of<data::Batch>())
      .def_readonly("first", &data::Batch::first, "The row of the whole batch that x's first row is (data parallel: this rank's shard).");

  m.def("_parse_safetensors", [](const py::bytes& data, const std::string& name) {
    const std::string s = data;
    const io::SafeTensors st = nogil([&] { return io::parse_safetensors(s, name); });
    py::dict d;
    for (const auto& [n, t] : st.tensors) d[py::str(n)] = t;
    return py::make_tuple(d, st.metadata);
  }, py::arg("data"), py::arg("name"), "(tensors, metadata) of a safetensors file's bytes, with bitgrad's checksum required.");
}

}  // namespace bitgrad::python
