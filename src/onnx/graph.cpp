// onnx::load and GraphModule (bitgrad/onnx.hpp): the file's graph compiled into value slots and
// nodes in topological order, checked node by node against the op table before anything runs
// (one error for everything bitgrad lacks), constant subgraphs folded, then run with bitgrad's
// ops on every forward.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <queue>
#include <set>

#include "bitgrad/io.hpp"
#include "onnx/graph_impl.hpp"
#include "kernels/kernels.hpp"
#include "ops/fused.hpp"

namespace bitgrad::onnx {

std::string Node::label() const { return "node '" + proto->name + "' (" + proto->op_type + ")"; }

bool is_float(int ty) { return ty == kFloat || ty == kDouble; }
bool is_int(int ty) { return ty == kInt64 || ty == kInt32; }

DType storage_of(int ty, const std::string& where) {
  switch (ty) {
    case kFloat: return DType::f32;
    case kDouble: return DType::f64;
    case kInt64: case kInt32: return DType::i64;
    case kBool: return DType::u8;
    default: throw Error(where + ": dtype " + elem_type_name(ty) + ": bitgrad computes in float and double and holds int64, int32 and bool");
  }
}

namespace {

std::int64_t checked_numel(const std::vector<std::int64_t>& dims, const std::string& where) {
  BITGRAD_CHECK(dims.size() <= static_cast<std::size_t>(kMaxDims), where.c_str(), dims.size(), " dimensions; bitgrad has at most ", kMaxDims);
  std::int64_t n = 1;
  for (const std::int64_t d : dims) {
    BITGRAD_CHECK(d >= 0 && d < (std::int64_t(1) << 40), where.c_str(), "dimension ", d, " out of range");
    BITGRAD_CHECK(d == 0 || n <= (std::int64_t(1) << 40) / d, where.c_str(), "more than 2^40 elements");
    n *= d;
  }
  return n;
}

template <class T, class S>
Tensor from_values(const std::vector<S>& v, std::int64_t n, const Shape& shape, const std::string& where) {
  BITGRAD_CHECK(static_cast<std::int64_t>(v.size()) == n, where.c_str(), "holds ", v.size(), " values for ", n, " elements");
  std::vector<T> out(v.begin(), v.end());
  return Tensor::from<T>(out, shape);
}

template <class T, class Raw = T>
Tensor from_raw(const std::string& raw, std::int64_t n, const Shape& shape, const std::string& where) {
  BITGRAD_CHECK(raw.size() == static_cast<std::size_t>(n) * sizeof(Raw), where.c_str(), "raw_data of ", raw.size(), " bytes for ", n,
                " elements of ", sizeof(Raw), " bytes");
  std::vector<Raw> r(static_cast<std::size_t>(n));
  if (n) std::memcpy(r.data(), raw.data(), raw.size());
  std::vector<T> out(r.begin(), r.end());
  return Tensor::from<T>(out, shape);
}

}  // namespace

Value value_of(const TensorProto& t, const std::string& where) {
  BITGRAD_CHECK(!t.external, where.c_str(), "data in an external file: bitgrad reads models with their data inside");
  BITGRAD_CHECK(!t.has_segment && !t.has_strings, where.c_str(), "segments and string data are not supported");
  const std::int64_t n = checked_numel(t.dims, where);
  const Shape shape(t.dims);
  Value v;
  v.ty = t.data_type;
  switch (t.data_type) {
    case kFloat: v.t = t.has_raw ? from_raw<float>(t.raw_data, n, shape, where) : from_values<float>(t.float_data, n, shape, where); break;
    case kDouble: v.t = t.has_raw ? from_raw<double>(t.raw_data, n, shape, where) : from_values<double>(t.double_data, n, shape, where); break;
    case kInt64:
      v.t = t.has_raw ? from_raw<std::int64_t>(t.raw_data, n, shape, where) : from_values<std::int64_t>(t.int64_data, n, shape, where);
      break;
    case kInt32:
      v.t = t.has_raw ? from_raw<std::int64_t, std::int32_t>(t.raw_data, n, shape, where)
                      : from_values<std::int64_t>(t.int32_data, n, shape, where);
      break;
    case kBool: {
      v.t = t.has_raw ? from_raw<std::uint8_t>(t.raw_data, n, shape, where) : from_values<std::uint8_t>(t.int32_data, n, shape, where);
      std::uint8_t* p = v.t.mutable_data<std::uint8_t>();
      for (std::int64_t k = 0; k < n; ++k) p[k] = p[k] != 0;
      break;
    }
    default: storage_of(t.data_type, where);  // throws naming the dtype
  }
  return v;
}

TensorProto tensor_proto_of(const std::string& name, const Value& v) {
  TensorProto p;
  p.name = name;
  p.data_type = v.ty;
  p.dims = v.t.shape().vec();
  p.has_raw = true;
  const Tensor c = v.t.contiguous_copy();
  if (v.ty == kInt32) {
    std::vector<std::int32_t> w;
    for (const std::int64_t x : c.to_vector<std::int64_t>()) w.push_back(static_cast<std::int32_t>(x));
    p.raw_data.assign(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  } else {
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
    const char* src = c.numel() ? static_cast<const char*>(static_cast<const void*>(c.storage()->data())) : nullptr;
    if (bytes) p.raw_data.assign(src, bytes);
  }
  return p;
}

// ---- Call ---------------------------------------------------------------------------------------
const Value& Call::v(std::size_t k) const {
  if (!has(k)) fail("input " + std::to_string(k) + " is required");
  return *ins[k];
}

std::int64_t Call::i(const char* name, std::int64_t dflt) const {
  auto it = node.attrs.find(name);
  return it == node.attrs.end() ? dflt : it->second->i;
}
double Call::f(const char* name, double dflt) const {
  auto it = node.attrs.find(name);
  return it == node.attrs.end() ? dflt : static_cast<double>(it->second->f);
}
std::string Call::s(const char* name, const std::string& dflt) const {
  auto it = node.attrs.find(name);
  return it == node.attrs.end() ? dflt : it->second->s;
}
std::vector<std::int64_t> Call::ints(const char* name) const {
  auto it = node.attrs.find(name);
  return it == node.attrs.end() ? std::vector<std::int64_t>{} : it->second->ints;
}
std::vector<std::int64_t> Call::int_values(std::size_t k) const {
  const Value& val = v(k);
  if (!is_int(val.ty)) fail("input " + std::to_string(k) + " must be int64, got " + elem_type_name(val.ty));
  return val.t.contiguous_copy().to_vector<std::int64_t>();
}
void Call::fail(const std::string& what) const { throw Error(g.where() + ": " + node.label() + ": " + what); }

// ---- load ---------------------------------------------------------------------------------------
namespace {

std::string check_node(Node& n, const GraphInfo& g) {
  const NodeProto& p = *n.proto;
  if (!p.domain.empty() && p.domain != "ai.onnx") return "domain '" + printable_excerpt(p.domain) + "': bitgrad runs the default domain only";
  n.def = find_op(p.op_type);
  if (!n.def) return "bitgrad has no op for ONNX " + printable_excerpt(p.op_type);
  for (const AttributeProto& a : p.attribute) {
    if (!a.ref_attr_name.empty()) return "attribute " + a.name + " refers to a function's attribute";
    const auto& allowed = n.def->attrs;
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* s) { return a.name == s; }))
      return "attribute " + printable_excerpt(a.name) + " is not supported";
    if (a.has_graph) return "attribute " + a.name + " holds a subgraph (bitgrad has no control flow)";
    n.attrs[a.name] = &a;
  }
  const int nin = static_cast<int>(p.input.size());
  int present = nin;
  while (present > 0 && p.input[static_cast<std::size_t>(present - 1)].empty()) --present;
  if (present < n.def->min_in || present > n.def->max_in)
    return std::to_string(present) + " inputs; bitgrad's mapping takes " + std::to_string(n.def->min_in) + " to " + std::to_string(n.def->max_in);
  return n.def->check ? n.def->check(n, g) : std::string();
}

std::int64_t default_opset(const ModelProto& m, const std::string& where) {
  std::int64_t v = -1;
  for (const OpsetId& o : m.opset_import)
    if (o.domain.empty() || o.domain == "ai.onnx") v = o.version;
  BITGRAD_CHECK(v >= 0, where.c_str(), "no opset of the default domain (ModelProto.opset_import)");
  BITGRAD_CHECK(v >= 13 && v <= 17, where.c_str(), "opset ", v, "; bitgrad imports opsets 13 to 17 (re-export with opset_version=17)");
  return v;
}

}  // namespace

std::shared_ptr<GraphInfo> compile(const std::string& bytes, const std::string& name, const LoadOptions& options, memory::Budget& budget) {
  auto g = std::make_shared<GraphInfo>();
  g->file = name;
  g->options = options;
  g->model = parse_model(bytes, name);
  const std::string where = g->where();
  g->opset = default_opset(g->model, where);
  const GraphProto& gp = g->model.graph;
  BITGRAD_CHECK(!gp.has_sparse_initializer, where.c_str(), "sparse initializers are not supported");

  std::map<std::string, int> slot;
  auto new_slot = [&](const std::string& s, const char* what) {
    BITGRAD_CHECK(!s.empty(), where.c_str(), "a ", what, " without a name");
    BITGRAD_CHECK(slot.count(s) == 0, where.c_str(), "the name '", printable_excerpt(s), "' is defined twice");
    const int k = static_cast<int>(g->slot_names.size());
    slot[s] = k;
    g->slot_names.push_back(s);
    g->constants.emplace_back();
    return k;
  };
  for (const TensorProto& t : gp.initializer) {
    Initializer in;
    in.name = t.name;
    in.slot = new_slot(t.name, "initializer");
    budget.set_what(where + ": initializer '" + printable_excerpt(t.name) + "'");
    const Value v = value_of(t, where + ": initializer '" + printable_excerpt(t.name) + "'");
    in.ty = v.ty;
    in.t = v.t;
    in.kind = is_float(v.ty) ? Initializer::parameter : Initializer::constant;
    g->constants[static_cast<std::size_t>(in.slot)] = v;
    g->inits.push_back(in);
  }
  for (const ValueInfoProto& v : gp.input) {
    if (slot.count(v.name) && std::any_of(gp.initializer.begin(), gp.initializer.end(), [&](const TensorProto& t) { return t.name == v.name; }))
      continue;  // an initializer listed as an input too (keep_initializers_as_inputs)
    BITGRAD_CHECK(v.tensor_type, where.c_str(), "input '", printable_excerpt(v.name), "' is not a tensor (bitgrad has tensors only)");
    storage_of(v.elem_type, where + ": input '" + printable_excerpt(v.name) + "'");
    g->input_slots.push_back(new_slot(v.name, "graph input"));
    g->input_names.push_back(v.name);
    g->input_info.push_back(&v);
  }
  BITGRAD_CHECK(!g->input_slots.empty(), where.c_str(), "the graph has no input");

  // nodes: slots for their outputs, then a stable topological order (Kahn, lowest index first)
  const std::size_t N = gp.node.size();
  std::vector<Node> nodes(N);
  for (std::size_t k = 0; k < N; ++k) {
    nodes[k].proto = &gp.node[k];
    for (const std::string& o : gp.node[k].output) nodes[k].out.push_back(o.empty() ? -1 : new_slot(o, "node output"));
  }
  std::vector<int> producer(g->slot_names.size(), -1);
  for (std::size_t k = 0; k < N; ++k)
    for (const int o : nodes[k].out)
      if (o >= 0) producer[static_cast<std::size_t>(o)] = static_cast<int>(k);
  std::vector<std::vector<std::size_t>> users(N);
  std::vector<int> waiting(N, 0);
  std::vector<bool> read(g->slot_names.size(), false);
  for (std::size_t k = 0; k < N; ++k) {
    for (const std::string& i : gp.node[k].input) {
      if (i.empty()) {
        nodes[k].in.push_back(-1);
        continue;
      }
      auto it = slot.find(i);
      BITGRAD_CHECK(it != slot.end(), where.c_str(), "node '", printable_excerpt(gp.node[k].name), "' (", printable_excerpt(gp.node[k].op_type),
                    ") reads '", printable_excerpt(i), "', which nothing defines");
      nodes[k].in.push_back(it->second);
      read[static_cast<std::size_t>(it->second)] = true;
      const int p = producer[static_cast<std::size_t>(it->second)];
      if (p >= 0) {
        users[static_cast<std::size_t>(p)].push_back(k);
        ++waiting[k];
      }
    }
  }
  for (const ValueInfoProto& o : gp.output) {
    auto it = slot.find(o.name);
    BITGRAD_CHECK(it != slot.end(), where.c_str(), "output '", printable_excerpt(o.name), "' is not defined by the graph");
    g->output_slots.push_back(it->second);
    g->output_names.push_back(o.name);
    read[static_cast<std::size_t>(it->second)] = true;
  }
  BITGRAD_CHECK(!g->output_slots.empty(), where.c_str(), "the graph has no output");
  for (std::size_t k = 0; k < N; ++k) {
    bool only = !users[k].empty();
    for (const std::size_t u : users[k]) only = only && gp.node[u].op_type == "MatMul";
    for (const int o : g->output_slots)
      for (const int mine : nodes[k].out) only = only && o != mine;
    nodes[k].read_by_matmul_only = only;
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t k = 0; k < N; ++k)
    if (!waiting[k]) ready.push(k);
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const std::size_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (const std::size_t u : users[k])
      if (--waiting[u] == 0) ready.push(u);
  }
  BITGRAD_CHECK(order.size() == N, where.c_str(), "the graph has a cycle");
  for (Node& n : nodes)
    for (int& o : n.out)
      if (o >= 0 && !read[static_cast<std::size_t>(o)]) o = -1;  // an output nobody reads is not kept

  // every node against the table: the first problem is the error, the others counted in it
  std::string first;
  std::map<std::string, int> others;
  std::size_t bad = 0;
  for (const std::size_t k : order) {
    const std::string problem = check_node(nodes[k], *g);
    if (problem.empty()) continue;
    if (bad++ == 0) first = nodes[k].label() + ": " + problem;
    else ++others[nodes[k].proto->op_type];
  }
  if (bad) {
    std::string msg = where + ": " + first;
    if (bad > 1) {
      msg += " (and " + std::to_string(bad - 1) + " more node" + (bad > 2 ? "s" : "") + " bitgrad cannot run:";
      for (const auto& [type, count] : others) msg += " " + printable_excerpt(type) + (count > 1 ? " x" + std::to_string(count) : "");
      msg += ")";
    }
    throw Error(msg);
  }

  // BatchNormalization's running statistics are buffers; Dropout nodes numbered
  std::uint64_t dropouts = 0;
  for (const std::size_t k : order) {
    Node& n = nodes[k];
    if (n.proto->op_type == "Dropout") n.dropout_id = dropouts++;
    if (n.proto->op_type != "BatchNormalization") continue;
    for (const std::size_t i : {std::size_t(3), std::size_t(4)}) {
      for (Initializer& in : g->inits)
        if (i < n.in.size() && in.slot == n.in[i] && in.kind == Initializer::parameter) in.kind = Initializer::buffer;
    }
    const std::string& mean = n.proto->input.size() > 3 ? n.proto->input[3] : std::string();
    const std::string suffix = ".running_mean";
    if (mean.size() > suffix.size() && mean.compare(mean.size() - suffix.size(), suffix.size(), suffix) == 0)
      n.batches_tracked = Tensor::zeros(Shape{}, DType::i64);
  }
  for (Initializer& in : g->inits)
    if (in.kind == Initializer::parameter) in.t.set_requires_grad(true);

  // fold: a pure node whose inputs are all constants (not parameters or buffers) runs once, here
  std::vector<bool> fixed(g->slot_names.size(), false);
  for (const Initializer& in : g->inits) fixed[static_cast<std::size_t>(in.slot)] = in.kind == Initializer::constant;
  const nn::Context eval;
  for (const std::size_t k : order) {
    Node& n = nodes[k];
    bool constant = n.def->foldable;
    for (const int i : n.in)
      if (i >= 0 && !fixed[static_cast<std::size_t>(i)]) constant = false;
    if (!constant) {
      g->nodes.push_back(n);
      continue;
    }
    NoGradGuard no_grad;
    budget.set_what(where + ": " + n.label() + ", folded at load");
    Call c{n, *g, false, eval, {}, {}};
    for (const int i : n.in) c.ins.push_back(i >= 0 ? &g->constants[static_cast<std::size_t>(i)] : nullptr);
    try {
      n.def->run(c);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("onnx: ", 0) == 0) throw;
      throw Error(where + ": " + n.label() + ": " + what);
    } catch (const std::bad_alloc&) {  // a constant the graph's numbers ask for that memory cannot hold
      throw Error(where + ": " + n.label() + ": out of memory computing a constant at load");
    }
    for (std::size_t o = 0; o < n.out.size() && o < c.out.size(); ++o) {
      if (n.out[o] < 0) continue;
      g->constants[static_cast<std::size_t>(n.out[o])] = c.out[o];
      fixed[static_cast<std::size_t>(n.out[o])] = true;
    }
    ++g->folded;
  }

  // a MatMul read by one Add alone, the Add run right after it, its other input a file's tensor
  // (an initializer or a folded constant): the pair runs as one matmul_add where that input is a
  // bias of b's columns (run_graph checks; else both run as written). Adjacent, the fused node
  // takes the pair's place in the backward's reverse creation order, and the bias, the MatMul's
  // operands and their gradients' arrival orders are the pair's.
  std::vector<int> readers(g->slot_names.size(), 0), producer_at(g->slot_names.size(), -1);
  for (std::size_t k = 0; k < g->nodes.size(); ++k) {
    for (const int i : g->nodes[k].in)
      if (i >= 0) ++readers[static_cast<std::size_t>(i)];
    for (const int o : g->nodes[k].out)
      if (o >= 0) producer_at[static_cast<std::size_t>(o)] = static_cast<int>(k);
  }
  for (const int o : g->output_slots) ++readers[static_cast<std::size_t>(o)];
  for (std::size_t k = 0; k < g->nodes.size(); ++k) {
    Node& add = g->nodes[k];
    if (add.proto->op_type != "Add" || add.in.size() != 2 || add.in[0] < 0 || add.in[1] < 0) continue;
    for (int side = 0; side < 2; ++side) {
      const int slot = add.in[static_cast<std::size_t>(side)], p = producer_at[static_cast<std::size_t>(slot)];
      const int other = add.in[static_cast<std::size_t>(1 - side)];
      const bool file_tensor = producer_at[static_cast<std::size_t>(other)] < 0 &&
                               std::find(g->input_slots.begin(), g->input_slots.end(), other) == g->input_slots.end();
      if (p < 0 || p + 1 != static_cast<int>(k) || readers[static_cast<std::size_t>(slot)] != 1 || !file_tensor) continue;
      Node& mm = g->nodes[static_cast<std::size_t>(p)];
      if (mm.proto->op_type != "MatMul" || mm.out.size() != 1 || mm.in.size() != 2 || mm.in[0] < 0 || mm.in[1] < 0) continue;
      mm.fused_into = static_cast<int>(k);
      add.fused_from = p;
      add.fused_input = side;
      break;
    }
  }
  return g;
}

// ---- running --------------------------------------------------------------------------------------
std::vector<Tensor> run_graph(const GraphInfo& g, const std::vector<Tensor>& inputs, const nn::Context& ctx, const NodeObserver* observer) {
  const std::string where = g.where();
  BITGRAD_CHECK(inputs.size() == g.input_slots.size(), where.c_str(), "the graph takes ", g.input_slots.size(), " inputs, got ", inputs.size());
  std::vector<Value> slots = g.constants;
  std::string batch_hint;  // an input at another batch than the file declares: a node may fix it
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const ValueInfoProto& info = *g.input_info[k];
    Tensor x = inputs[k];
    BITGRAD_CHECK(x.defined(), where.c_str(), "input '", g.input_names[k], "' is undefined");
    const DType want = storage_of(info.elem_type, where);
    if (x.dtype() != want) {
      // token ids come from bitgrad's text datasets as floats holding integers
      BITGRAD_CHECK(want == DType::i64 && is_floating(x.dtype()), where.c_str(), "input '", g.input_names[k], "' is ",
                    elem_type_name(info.elem_type), ", got ", dtype_name(x.dtype()));
      x = cast(x, DType::i64);
    }
    if (info.has_shape) {
      BITGRAD_CHECK(static_cast<std::size_t>(x.ndim()) == info.dims.size(), where.c_str(), "input '", g.input_names[k], "' has rank ",
                    info.dims.size(), ", got ", x.shape().str());
      if (!info.dims.empty() && info.dims[0] > 0 && x.ndim() > 0 && x.shape()[0] != info.dims[0] && batch_hint.empty())
        batch_hint = " (input '" + g.input_names[k] + "' is declared with a batch of " + std::to_string(info.dims[0]) + " and runs with " +
                     std::to_string(x.shape()[0]) + ": a graph exported without a free batch axis may fix the batch in its constants; "
                     "export it with dynamic_axes={'" + g.input_names[k] + "': {0: 'batch'}})";
      for (std::size_t d = 1; d < info.dims.size(); ++d)  // the batch dimension is free (micro-batches)
        BITGRAD_CHECK(info.dims[d] < 0 || info.dims[d] == x.shape()[static_cast<int>(d)], where.c_str(), "input '", g.input_names[k],
                      "' has dimension ", d, " of ", info.dims[d], ", got ", x.shape().str());
    }
    slots[static_cast<std::size_t>(g.input_slots[k])] = Value{x, info.elem_type};
  }
  const bool training = g.options.training && ctx.training;
  auto run_node = [&](const Node& n) {
    Call c{n, g, training, ctx, {}, {}};
    for (const int i : n.in) {
      if (i >= 0 && !slots[static_cast<std::size_t>(i)].t.defined()) c.fail("input '" + g.slot_names[static_cast<std::size_t>(i)] + "' was not computed");
      c.ins.push_back(i >= 0 ? &slots[static_cast<std::size_t>(i)] : nullptr);
    }
    try {
      n.def->run(c);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("onnx: ", 0) != 0) c.fail(what + batch_hint);
      if (batch_hint.empty()) throw;
      throw Error(what + batch_hint);
    }
    for (std::size_t o = 0; o < n.out.size(); ++o) {
      if (n.out[o] < 0) continue;
      if (o >= c.out.size() || !c.out[o].t.defined()) c.fail("output " + std::to_string(o) + " is not computed by bitgrad's mapping");
      slots[static_cast<std::size_t>(n.out[o])] = c.out[o];
    }
    if (observer) (*observer)(c);
  };
  // A MatMul and the Add of its bias as one matmul_add (the composition's bits, one GEMM):
  // unless a node observer watches every node, and only for a float product of a shared 2-d b
  // whose columns the Add's other operand, 1-d, matches; else false (both then run as written).
  auto run_fused = [&](const Node& add) {
    const Node& mm = g.nodes[static_cast<std::size_t>(add.fused_from)];
    const Value &a = slots[static_cast<std::size_t>(mm.in[0])], &b = slots[static_cast<std::size_t>(mm.in[1])];
    const Value& bias = slots[static_cast<std::size_t>(add.in[static_cast<std::size_t>(1 - add.fused_input)])];
    if (!a.t.defined() || !b.t.defined() || !bias.t.defined() || !is_float(a.ty) || a.ty != b.ty || a.ty != bias.ty) return false;
    if (a.t.ndim() < 2 || b.t.ndim() != 2 || bias.t.ndim() != 1 || a.t.shape()[a.t.ndim() - 1] != b.t.shape()[0] ||
        bias.t.shape()[0] != b.t.shape()[1])
      return false;
    Tensor y;
    try {
      y = matmul_add(a.t, b.t, bias.t);
    } catch (const Error& e) {
      Call c{mm, g, training, ctx, {}, {}};
      c.fail(std::string(e.what()) + batch_hint);
    }
    if (add.out[0] >= 0) slots[static_cast<std::size_t>(add.out[0])] = Value{y, a.ty};
    return true;
  };
  for (const Node& n : g.nodes) {
    if (!observer && n.fused_into >= 0) continue;  // its Add runs it
    if (!observer && n.fused_from >= 0 && run_fused(n)) continue;
    if (!observer && n.fused_from >= 0) run_node(g.nodes[static_cast<std::size_t>(n.fused_from)]);
    run_node(n);
  }
  std::vector<Tensor> out;
  for (const int o : g.output_slots) out.push_back(slots[static_cast<std::size_t>(o)].t);
  return out;
}
// ---- the module -----------------------------------------------------------------------------------
GraphModule::GraphModule(std::shared_ptr<GraphInfo> g) : g_(std::move(g)) {
  for (Initializer& in : g_->inits) {
    if (in.kind == Initializer::parameter) {
      params_.push_back(register_parameter(in.name, in.t));
    } else if (in.kind == Initializer::buffer) {
      buffers_.push_back(register_buffer(in.name, in.t));
      const std::string suffix = ".running_var";
      if (in.name.size() <= suffix.size() || in.name.compare(in.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      const std::string prefix = in.name.substr(0, in.name.size() - suffix.size());
      for (const Node& n : g_->nodes)
        if (n.batches_tracked.defined() && n.proto->input.size() > 4 && n.proto->input[4] == in.name)
          register_buffer(prefix + ".num_batches_tracked", n.batches_tracked);
    }
  }
}

void GraphModule::init(nn::Init, std::uint64_t, std::uint64_t&) {}  // the file's weights are the model

Tensor GraphModule::forward(const Tensor& x, const nn::Context& ctx) {
  BITGRAD_CHECK(g_->input_slots.size() == 1, g_->where().c_str(), "forward takes one input; the graph has ", g_->input_slots.size(),
                " (use run)");
  {
    const std::lock_guard<std::mutex> lock(seen_mutex_);
    seen_ = x.shape().vec();
  }
  // A graph that keeps its samples apart only per 32-sample block (numerics §42) runs each block
  // as its own forward and backward wherever it trains or takes gradients: a plain forward and
  // backward then has the bits of bitgrad.accumulate, the training step and every split (its
  // dropout keyed by each block's first row), and each parameter gets one gradient per piece,
  // the tree over its blocks. Evaluation without gradients is batch-invariant (T4) and runs
  // whole; batch statistics need the whole batch.
  if (x.ndim() > 0 && x.shape()[0] > 0 && (ctx.training || grad_enabled()) && runs_per_block(x.shape()))
    return per_block([&](const Tensor& xb, std::int64_t r0) {
      nn::Context c = ctx;
      c.row_offset = ctx.row_offset + r0;
      return run_graph(*g_, {xb}, c)[0];
    }, x, params_, kern::kBatchBlock);
  return run_graph(*g_, {x}, ctx)[0];
}

bool GraphModule::runs_per_block(const Shape& input) const {
  if (input.ndim() == 0 || g_->input_slots.size() != 1) return false;
  SampleAnalysis a;
  try {
    a = samples_of_batches(input.without(0));
  } catch (const Error&) {
    return false;  // a graph the analysis cannot follow at its probe shape runs whole, as it always did
  }
  return a.mode == SampleAnalysis::Mode::per_block && !a.batch_statistics;
}

std::vector<Tensor> GraphModule::run(const std::vector<Tensor>& inputs, const nn::Context& ctx) { return run_graph(*g_, inputs, ctx); }

Shape GraphModule::output_shape(const Shape& in) const {
  BITGRAD_CHECK(g_->input_slots.size() == 1, g_->where().c_str(), "output_shape takes one input; the graph has ", g_->input_slots.size());
  const ValueInfoProto& info = *g_->input_info[0];
  NoGradGuard no_grad;
  const Tensor zeros = Tensor::zeros(in, storage_of(info.elem_type, g_->where()));
  return run_graph(*g_, {zeros}, nn::Context{})[0].shape();
}

std::string GraphModule::describe() const {
  std::int64_t n = 0;
  for (const Tensor& t : params_) n += t.numel();
  return "OnnxGraph(" + g_->file + ": " + std::to_string(g_->nodes.size()) + " nodes, " + std::to_string(g_->folded) + " folded, " +
         std::to_string(params_.size()) + " parameters (" + std::to_string(n) + " values), opset " + std::to_string(g_->opset) + ")";
}

const std::vector<std::string>& GraphModule::input_names() const { return g_->input_names; }
const std::vector<std::string>& GraphModule::output_names() const { return g_->output_names; }
std::vector<std::int64_t> GraphModule::input_dims(std::size_t i) const { return g_->input_info.at(i)->dims; }
std::string GraphModule::input_type(std::size_t i) const { return elem_type_name(g_->input_info.at(i)->elem_type); }
std::size_t GraphModule::node_count() const { return g_->nodes.size(); }
std::size_t GraphModule::folded_count() const { return g_->folded; }
std::int64_t GraphModule::opset() const { return g_->opset; }
bool GraphModule::runs_op(const std::string& op_type) const {
  return std::any_of(g_->nodes.begin(), g_->nodes.end(), [&](const Node& n) { return n.proto->op_type == op_type; });
}
bool GraphModule::training_semantics() const { return g_->options.training; }
SampleAnalysis GraphModule::samples(const Shape& input) const {
  const std::vector<std::int64_t> key = input.vec();
  {
    const std::lock_guard<std::mutex> lock(seen_mutex_);
    for (const auto& [shape, a] : analyses_)
      if (shape == key) return a;
  }
  SampleAnalysis a = analyze_samples(*g_, input);  // shapes only: the parameters' values do not matter
  const std::lock_guard<std::mutex> lock(seen_mutex_);
  if (analyses_.size() >= 8) analyses_.erase(analyses_.begin());
  analyses_.emplace_back(key, a);
  return a;
}
SampleAnalysis GraphModule::samples_of_batches(const Shape& sample) const {
  const std::vector<std::int64_t> dims = g_->input_slots.size() == 1 ? g_->input_info[0]->dims : std::vector<std::int64_t>{};
  std::vector<std::int64_t> s{!dims.empty() && dims[0] > 1 ? dims[0] : 3};
  for (const std::int64_t d : sample) s.push_back(d);
  return samples(Shape(s));
}

SampleAnalysis GraphModule::samples() const {
  std::vector<std::int64_t> s;
  {
    const std::lock_guard<std::mutex> lock(seen_mutex_);
    s = seen_;
  }
  if (s.empty() && g_->input_slots.size() == 1) {
    s = g_->input_info[0]->dims;
    for (std::size_t d = 1; d < s.size(); ++d)
      BITGRAD_CHECK(s[d] > 0, g_->where().c_str(), "input '", g_->input_names[0], "' declares dimension ", d,
                    " symbolic and no forward has run: pass the shape to follow the samples at");
  }
  BITGRAD_CHECK(!s.empty(), g_->where().c_str(), "the samples are followed from an input with a batch axis; input '",
                g_->input_names.empty() ? std::string() : g_->input_names[0], "' is a scalar");
  if (s[0] < 2) s[0] = 3;
  return samples(Shape(s));
}

std::string GraphModule::to_onnx_bytes() const {
  ModelProto m = g_->model;  // the graph as read; the initializers' values as they are now
  for (std::size_t k = 0; k < g_->inits.size(); ++k) {
    const Initializer& in = g_->inits[k];
    m.graph.initializer[k] = tensor_proto_of(in.name, Value{in.t, in.ty});
  }
  m.producer_name = "bitgrad";
  m.producer_version = "";
  return serialize_model(m);
}

// The import's memory: initializers, folded constants and the load-time forward, held at once,
// bounded before each allocation (memory::Budget) by LoadOptions::memory_bytes or what the
// system has available.
static double import_budget(const LoadOptions& options) {
  if (options.memory_bytes > 0) return options.memory_bytes;
  const double have = memory::available_bytes();
  return have > 0 ? have : std::numeric_limits<double>::infinity();
}

std::shared_ptr<GraphModule> load_bytes(const std::string& bytes, const std::string& name, const LoadOptions& options) {
  memory::Budget budget(import_budget(options), "onnx: " + name);
  auto m = std::make_shared<GraphModule>(compile(bytes, name, options, budget));
  // the shapes checked once, before training: an evaluation forward at the declared input shape
  if (m->input_names().size() == 1) {
    std::vector<std::int64_t> dims = m->input_dims(0);
    if (!dims.empty() && std::all_of(dims.begin(), dims.end(), [](std::int64_t d) { return d > 0; })) {
      Shape declared;
      try {
        declared = Shape(dims);  // its element count checked
      } catch (const Error& e) {
        throw Error("onnx: " + name + ": input '" + m->input_names()[0] + "' as declared: " + e.what());
      }
      budget.set_what("onnx: " + name + ": the load-time forward at the declared input shape " + declared.str());
      m->output_shape(declared);
    }
  }
  return m;
}

std::shared_ptr<GraphModule> load(const std::string& path, const LoadOptions& options) {
  return load_bytes(io::read_file(path, Limits().max_file_bytes), path, options);
}

void check_bytes(const std::string& bytes, const std::string& name) {
  memory::Budget budget(import_budget(LoadOptions()), "onnx: " + name);
  compile(bytes, name, LoadOptions(), budget);
}

bool uses_op(const std::string& path, const std::string& op_type) {
  const ModelProto m = parse_model(io::read_file(path, Limits().max_file_bytes), path);
  return std::any_of(m.graph.node.begin(), m.graph.node.end(), [&](const NodeProto& n) { return n.op_type == op_type; });
}

}  // namespace bitgrad::onnx
