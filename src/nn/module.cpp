#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "bitgrad/math.hpp"
#include "bitgrad/nn.hpp"

namespace bitgrad::nn {

namespace {
// the entry of `name` in a registration list, or null
template <class V>
auto* find_entry(V& v, const std::string& name) {
  for (auto& e : v)
    if (e.first == name) return &e;
  return static_cast<decltype(&v.front())>(nullptr);
}
}  // namespace

// A name registered again keeps its place (PyTorch's dict assignment): attribute assignment in
// Python replaces a layer or a tensor without reordering the state.
Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  if (auto* e = find_entry(params_, name)) return e->second = std::move(t);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  std::erase(non_persistent_, name);
  if (!persistent) non_persistent_.push_back(name);
  if (auto* e = find_entry(buffers_, name)) return e->second = std::move(t);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [bn, t] : child->named_buffers()) out.emplace_back(name + "." + bn, t);
  return out;
}

namespace {
// Whether `target` is `m` or a module under it (children before registration: no cycle yet).
bool holds(const Module& m, const Module* target) {
  if (&m == target) return true;
  for (const auto& [name, child] : m.children())
    if (child && holds(*child, target)) return true;
  return false;
}
}  // namespace

void Module::register_module(const std::string& name, std::shared_ptr<Module> m) {
  // a module that contained itself would recurse without end in every walk of the tree
  BITGRAD_CHECK(!m || !holds(*m, this), "module", "cannot register '", name, "' (", m ? m->describe() : std::string(),
                "): it is this module or contains it, and a module cannot contain itself");
  if (auto* e = find_entry(children_, name)) {
    e->second = std::move(m);
    return;
  }
  children_.emplace_back(name, std::move(m));
}

// ---- PyTorch's module features ----------------------------------------------------
bool Module::unregister(const std::string& name) {
  auto drop = [&](auto& v) {
    const auto n = v.size();
    std::erase_if(v, [&](const auto& e) { return e.first == name; });
    return v.size() != n;
  };
  std::erase(non_persistent_, name);
  return drop(params_) || drop(buffers_) || drop(children_);
}

bool Module::buffer_persistent(const std::string& name) const {
  return std::find(non_persistent_.begin(), non_persistent_.end(), name) == non_persistent_.end();
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  // PyTorch's order: each module's parameters, then its persistent buffers, then its children's
  std::vector<std::pair<std::string, Tensor>> out;
  auto walk = [&](auto& self, const Module& m, const std::string& prefix) -> void {
    for (const auto& [n, t] : m.params_) out.emplace_back(prefix + m.state_key(n), t);
    for (const auto& [n, t] : m.buffers_)
      if (m.buffer_persistent(n)) out.emplace_back(prefix + m.state_key(n), t);
    for (const auto& [n, c] : m.children_) self(self, *c, prefix + n + ".");
  };
  walk(walk, *this, "");
  return out;
}

Module::LoadResult Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state, bool strict) {
  LoadResult r;
  const auto mine = state_dict();
  std::vector<std::pair<Tensor, Tensor>> copies;  // checked first: a failed load changes nothing
  for (const auto& entry : mine) {  // (not a structured binding: clang 14 cannot capture one in a lambda)
    const std::string& key = entry.first;
    const Tensor& t = entry.second;
    const auto it = std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == key; });
    if (it == state.end()) {
      r.missing.push_back(key);
      continue;
    }
    const Tensor& src = it->second;
    BITGRAD_CHECK(src.defined() && src.shape() == t.shape() && src.dtype() == t.dtype(), "load_state_dict", "'", key, "' is ",
                  src.defined() ? dtype_name(src.dtype()) : "undefined", " ", src.defined() ? src.shape().str() : "", "; the module's is ",
                  dtype_name(t.dtype()), " ", t.shape().str());
    copies.emplace_back(t, src);
  }
  for (const auto& entry : state) {
    const std::string& key = entry.first;
    if (std::find_if(mine.begin(), mine.end(), [&](const auto& e) { return e.first == key; }) == mine.end()) r.unexpected.push_back(key);
  }
  if (strict && (!r.missing.empty() || !r.unexpected.empty())) {
    std::string what;
    for (const auto& k : r.missing) what += (what.empty() ? "" : ", ") + std::string("missing '") + k + "'";
    for (const auto& k : r.unexpected) what += (what.empty() ? "" : ", ") + std::string("unexpected '") + k + "'";
    detail::fail("load_state_dict", "the state's keys differ from the module's (strict=True): ", what);
  }
  NoGradGuard ng;
  for (auto& [dst, src] : copies) dst.copy_from(src);
  return r;
}

Context Module::child_context(const Context& ctx, const std::string& name) const {
  if (!ctx.module_modes) return ctx;
  BITGRAD_CHECK(ctx.training || !training_, name.c_str(), "is in training mode inside a container in evaluation mode: call train() on the ",
                "container too, or pass the forward an nn.Context(training=True, ...) (PyTorch would train this module alone)");
  Context c = ctx;
  c.training = training_;
  return c;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;  // looked up, never iterated: the order is the walk's
  auto walk = [&](auto& self, const Module& m, const std::string& prefix) -> void {
    for (const auto& [n, t] : m.params_)
      if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(prefix + n, t);
    for (const auto& [n, c] : m.children_) self(self, *c, prefix + n + ".");
  };
  walk(walk, *this, "");
  return out;
}

Tensor Module::own_parameter(const std::string& name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  return Tensor();
}

bool Module::tie_parameter(const std::string& key, const Tensor& t) {
  auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& e) { return e.first == key || state_key(e.first) == key; });
  if (it == params_.end()) return false;
  BITGRAD_CHECK(t.defined() && t.shape() == it->second.shape() && t.dtype() == it->second.dtype(), describe().c_str(), "'", key,
                "' is ", dtype_name(it->second.dtype()), " ", it->second.shape().str(), "; the tensor assigned to it is ",
                t.defined() ? dtype_name(t.dtype()) : "undefined", " ", t.defined() ? t.shape().str() : "",
                " (a layer's parameter is replaced by a tensor of its shape and dtype: tie layers whose shapes agree)");
  BITGRAD_CHECK(t.requires_grad() && t.is_leaf(), describe().c_str(), "'", key,
                "' must be a leaf tensor that requires grad (another layer's parameter, or nn.Parameter)");
  it->second = t;
  bind_parameters();
  return true;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

namespace {
void cast_in_place(Tensor& t, DType dtype) {
  Tensor c = t.cast(dtype);
  TensorImpl& i = t.impl();  // shared with every handle of the tensor
  i.storage = c.impl().storage;
  i.strides = c.impl().strides;
  i.offset = 0;
  i.dtype = dtype;
}
}  // namespace

void Module::cast_parameters(DType dtype) {
  for (auto& [name, t] : params_)
    if (t.dtype() != dtype) cast_in_place(t, dtype);
  for (auto& [name, t] : buffers_)  // floating buffers follow (running statistics), counters stay i64
    if (t.dtype() != dtype && (t.dtype() == DType::f32 || t.dtype() == DType::f64)) cast_in_place(t, dtype);
  for (const auto& [name, child] : children_) child->cast_parameters(dtype);
}

void Module::number_sites(std::uint64_t& next) {
  site_ = next++;
  for (const auto& [name, child] : children_) child->number_sites(next);
}

void Module::init(Init weights, std::uint64_t seed, std::uint64_t& index) {
  for (const auto& [name, child] : children_) child->init(weights, seed, index);
}

Tensor Module::forward_rows(const Tensor&, const std::vector<std::int64_t>&, const std::vector<KvCache*>&, const Context&) {
  detail::fail(describe().c_str(), "has no cached decoding (decodes_rows() is false)");
}
Tensor Module::forward_steps(const Tensor&, std::vector<Tensor>&, const Context&) {
  detail::fail(describe().c_str(), "carries no state from step to step (carries_state() is false)");
}

bool Module::uses_batch_statistics() const {
  for (const auto& [name, child] : children_)
    if (child && child->uses_batch_statistics()) return true;
  return false;
}

Init parse_init(const std::string& name) {
  if (name == "kaiming_uniform") return Init::kaiming_uniform;
  if (name == "kaiming_normal") return Init::kaiming_normal;
  if (name == "xavier_uniform") return Init::xavier_uniform;
  if (name == "xavier_normal") return Init::xavier_normal;
  if (name == "zeros") return Init::zeros;
  if (name == "gpt2") return Init::gpt2;
  throw Error("init: unknown initialiser '" + name +
              "' (expected kaiming_uniform, kaiming_normal, xavier_uniform, xavier_normal, zeros or gpt2)");
}

const char* init_name(Init init) {
  switch (init) {
    case Init::kaiming_uniform: return "kaiming_uniform";
    case Init::kaiming_normal: return "kaiming_normal";
    case Init::xavier_uniform: return "xavier_uniform";
    case Init::xavier_normal: return "xavier_normal";
    case Init::zeros: return "zeros";
    case Init::gpt2: return "gpt2";
  }
  return "?";
}

void init_tensor(Tensor& t, Init init, std::int64_t fan_in, std::int64_t fan_out, const rng::Stream& stream) {
  NoGradGuard ng;
  const double fi = static_cast<double>(fan_in > 0 ? fan_in : 1), fo = static_cast<double>(fan_out > 0 ? fan_out : 1);
  const double gain = math::sqrt(2.0);
  double bound = 0, stddev = 0;
  bool uniform = true;
  switch (init) {
    case Init::kaiming_uniform: bound = math::sqrt(3.0) * gain / math::sqrt(fi); break;
    case Init::kaiming_normal: stddev = gain / math::sqrt(fi), uniform = false; break;
    case Init::xavier_uniform: bound = math::sqrt(6.0 / (fi + fo)); break;
    case Init::xavier_normal: stddev = math::sqrt(2.0 / (fi + fo)), uniform = false; break;
    case Init::zeros: t.fill_(0.0); return;
    case Init::gpt2: stddev = 0.02, uniform = false; break;
  }
  BITGRAD_DISPATCH_FLOAT(t.dtype(), "init", T, [&] {
    T* p = t.mutable_data<T>();
    if (uniform) stream.fill_uniform(p, t.numel(), 0, static_cast<T>(-bound), static_cast<T>(bound));
    else stream.fill_normal(p, t.numel(), 0, T(0), static_cast<T>(stddev));
  });
}

void initialize(Module& m, Init weights, std::uint64_t seed) {
  std::uint64_t index = 0;
  m.init(weights, seed, index);
}

}  // namespace bitgrad::nn
