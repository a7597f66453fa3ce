// Where an imported graph's samples go (numerics.md §42): the input's axis 0 followed through a
// forward of every node at a probe shape. Each value's samples sit on one axis, each sample
// holding `inner` consecutive entries of it (torch's attention folds the heads in: [N·H, T, d]);
// a node either keeps them apart (its output's samples found again), mixes them (a reduction,
// softmax or recurrence along them, a slice of them: the graph is `mixes_samples`), or keeps them
// apart without the batch rule on axis 0 (they sit elsewhere, or its gradient sums them another
// way: the graph runs `per_block`). Only what bitgrad's ops are known to do on axis 0 is `batch_rule`.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/onnx.hpp"
#include "onnx/graph_impl.hpp"

namespace bitgrad::onnx {
namespace {

struct Loc {
  bool has = false;        // the value carries samples
  int axis = 0;            // on this axis
  std::int64_t inner = 1;  // each sample holds `inner` consecutive entries of it
  bool operator==(const Loc&) const = default;
};

std::string shape_str(const Tensor& t) { return t.shape().str(); }

// t's shape with its samples' axis written N (N·k when each sample holds k entries): the probe's
// sample count is no part of the model
std::string shape_str(const Tensor& t, const Loc& l, std::int64_t n) {
  std::string s = "[";
  for (int k = 0; k < t.ndim(); ++k) {
    if (k) s += ", ";
    const std::int64_t d = t.shape()[k];
    if (k == l.axis && d == n * l.inner) s += l.inner == 1 ? std::string("N") : "N·" + std::to_string(l.inner);
    else s += std::to_string(d);
  }
  return s + "]";
}

class Follower {
 public:
  Follower(const GraphInfo& g, std::int64_t n) : g_(g), n_(n), loc_(g.slot_names.size()), grad_(g.slot_names.size(), false) {
    for (const Initializer& in : g.inits)
      if (in.kind == Initializer::parameter && in.slot >= 0) grad_[static_cast<std::size_t>(in.slot)] = true;
  }

  void input(int slot) { loc_[static_cast<std::size_t>(slot)] = Loc{true, 0, 1}; }

  void node(const Call& c) {
    const Node& n = c.node;
    std::vector<std::size_t> with;  // inputs that carry samples
    bool grad = false;
    for (std::size_t i = 0; i < n.in.size(); ++i) {
      if (n.in[i] < 0) continue;
      if (loc_[slot(n.in[i])].has) with.push_back(i);
      grad = grad || grad_[slot(n.in[i])];
    }
    for (std::size_t o = 0; o < n.out.size(); ++o)
      if (n.out[o] >= 0 && o < c.out.size()) grad_[slot(n.out[o])] = grad && is_float(c.out[o].ty);
    if (with.empty() || rep_.mode == SampleAnalysis::Mode::mixes_samples) return;
    const std::string& op = n.proto->op_type;
    std::optional<Loc> out = follow(c, op, with);
    if (!out) return;  // mixed: reported
    for (std::size_t o = 0; o < n.out.size(); ++o)
      if (n.out[o] >= 0) loc_[slot(n.out[o])] = out->has ? out_loc(c, op, o, *out) : Loc{};
    // Only a node that meets a value from the parameters sums over samples in its backward (a
    // weight's or a bias's gradient); elsewhere each sample's gradient is its own (contract T3).
    // There the batch rule needs the samples on axis 0, one each, and an op that sums them by it.
    if (rep_.mode != SampleAnalysis::Mode::batch_rule) return;
    bool params = false;
    for (std::size_t i = 0; i < n.in.size(); ++i) params = params || (n.in[i] >= 0 && grad_[slot(n.in[i])] && !loc_[slot(n.in[i])].has);
    if (!params) return;
    if ((op == "LSTM" || op == "GRU") && c.i("layout", 0) == 0 && c.x(0).shape()[1] == n_) return;  // rnn takes [T, N, I] to [N, T, I] itself (§34)
    for (const std::size_t i : with)
      if (!lead(loc_[slot(n.in[i])], c.x(i)))
        return unproven(n, "it meets the parameters with its input " + std::to_string(i) + " holding the samples " +
                               where(loc_[slot(n.in[i])], c.x(i)).substr(18) + ", so its gradient sums them other than by the batch rule");
    if (!rule_op(op)) return unproven(n, "bitgrad does not take its gradient over samples by the batch rule (" + op + " is not among the ops shown to)");
    if (op == "Gather" && !loc_[slot(n.in[0])].has && grad_[slot(n.in[0])] &&
        !(c.x(0).requires_grad() && c.x(0).ndim() == 2 && norm_axis(c.i("axis", 0), 2) == 0))  // not run as an embedding
      return unproven(n, "a Gather of a value computed from the parameters by each sample's indices: its gradient adds each row's uses in "
                         "index order over the whole micro-batch");
  }

  SampleAnalysis finish(const std::vector<Tensor>& outputs) {
    for (std::size_t k = 0; k < g_.output_slots.size() && k < outputs.size(); ++k) {
      const Loc& l = loc_[slot(g_.output_slots[k])];
      const bool ok = lead(l, outputs[k]);
      if (k == 0) rep_.output_on_axis0 = ok;
      if (!ok && rep_.output.empty() && rep_.mode != SampleAnalysis::Mode::mixes_samples)  // else not followed to the end
        rep_.output = "output '" + g_.output_names[k] + "' " + (l.has ? where(l, outputs[k]) : "carries no samples (" + shape_str(outputs[k]) + ")");
    }
    if (rep_.mode == SampleAnalysis::Mode::batch_rule) {
      // a value from the parameters read by several nodes: its gradient adds theirs, each a sum
      // over the whole micro-batch, so micro-batches would add them in another order
      std::vector<int> readers(loc_.size(), 0);
      std::vector<const Node*> second(loc_.size(), nullptr);
      for (const Node& n : g_.nodes) {
        if (n.proto->op_type == "Shape" || n.proto->op_type == "Size") continue;
        for (const int i : n.in)
          if (i >= 0 && grad_[slot(i)] && !loc_[slot(i)].has && ++readers[slot(i)] == 2) second[slot(i)] = &n;
      }
      for (std::size_t s = 0; s < readers.size(); ++s)
        if (readers[s] >= 2) {
          unproven(*second[s], "it is the second node to read '" + g_.slot_names[s] + "', which comes from the parameters: the gradient adds each reader's "
                               "sum over the micro-batch, in another order than the batch's");
          break;
        }
    }
    return rep_;
  }

 private:
  const GraphInfo& g_;
  std::int64_t n_;
  std::vector<Loc> loc_;
  std::vector<bool> grad_;
  SampleAnalysis rep_;

  static std::size_t slot(int s) { return static_cast<std::size_t>(s); }

  bool lead(const Loc& l, const Tensor& t) const { return l.has && l.axis == 0 && l.inner == 1 && t.ndim() > 0 && t.shape()[0] == n_; }

  std::string where(const Loc& l, const Tensor& t) const {
    std::string s = "holds the samples on axis " + std::to_string(l.axis) + " of " + shape_str(t, l, n_);
    if (l.inner > 1) s += " (" + std::to_string(l.inner) + " consecutive entries each)";
    else if (t.shape()[l.axis] != n_) s += " (among other entries of that axis)";
    return s;
  }

  std::optional<Loc> mixed(const Node& n, const std::string& why) {
    mixes(n, why);
    return std::nullopt;
  }
  void mixes(const Node& n, const std::string& why) {
    if (rep_.mode == SampleAnalysis::Mode::mixes_samples) return;
    rep_.mode = SampleAnalysis::Mode::mixes_samples;
    rep_.node = n.label();
    rep_.why = why;
  }
  std::string axis_of(const Loc& l, const Tensor& t) const { return "axis " + std::to_string(l.axis) + " of " + shape_str(t, l, n_) + " (the samples' axis)"; }
  void unproven(const Node& n, const std::string& why) {
    if (rep_.mode != SampleAnalysis::Mode::batch_rule) return;
    rep_.mode = SampleAnalysis::Mode::per_block;
    rep_.node = n.label();
    rep_.why = why;
  }

  // ops whose gradients over samples on axis 0 are the batch rule (numerics §3, §5, §6, §14, §15,
  // §31, §34) or that have none
  static bool rule_op(const std::string& op) {
    static const char* const ok[] = {
        "Abs", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Celu", "Clip", "Concat", "Conv", "Cos", "Div",
        "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "GRU", "Gather", "Gemm", "GlobalAveragePool", "GlobalMaxPool",
        "Greater", "HardSigmoid", "HardSwish", "Identity", "LSTM", "LayerNormalization", "LeakyRelu", "Less", "Log", "LogSoftmax", "MatMul", "Max",
        "MaxPool", "Mean", "Min", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
        "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Round", "Selu", "Sigmoid",
        "Sign", "Sin", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu",
        "Transpose", "Unsqueeze", "Where", "Xor"};
    return std::find_if(std::begin(ok), std::end(ok), [&](const char* s) { return op == s; }) != std::end(ok);
  }

  static int norm_axis(std::int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

  // the samples of a value of shape `s` whose samples, before a reshape, were at stride S (in
  // elements) for n_ samples: one axis must hold that digit whole
  std::optional<Loc> by_stride(std::int64_t S, const Shape& s) const {
    std::int64_t after = 1;
    for (int a = s.ndim() - 1; a >= 0; --a) {
      if (S % after == 0 && (after * s[a]) % (S * n_) == 0) return Loc{true, a, S / after};
      after *= s[a];
    }
    return std::nullopt;
  }
  static std::int64_t stride_of(const Loc& l, const Shape& s) {
    std::int64_t S = l.inner;
    for (int k = l.axis + 1; k < s.ndim(); ++k) S *= s[k];
    return S;
  }

  // the output's samples for every sample input: broadcasting aligns the trailing axes
  std::optional<Loc> broadcast(const Call& c, const std::vector<std::size_t>& with, int out_rank) {
    std::optional<Loc> got;
    for (const std::size_t i : with) {
      Loc l = loc_[slot(c.node.in[i])];
      l.axis += out_rank - c.x(i).ndim();
      if (got && !(*got == l)) {
        mixes(c.node, "it combines inputs whose samples sit on different axes (input " + std::to_string(with[0]) + " and input " + std::to_string(i) + ")");
        return std::nullopt;
      }
      got = l;
    }
    return got;
  }

  std::optional<Loc> follow(const Call& c, const std::string& op, const std::vector<std::size_t>& with) {
    const Node& n = c.node;
    auto in_loc = [&](std::size_t i) { return loc_[slot(n.in[i])]; };
    auto only = [&](std::size_t i) { return with.size() == 1 && with[0] == i; };
    const int r0 = c.x(with[0]).ndim();
    const int out_rank = c.out.empty() ? 0 : c.out[0].t.ndim();
    if (op == "Shape" || op == "Size" || op == "ConstantOfShape" || op == "Range") return Loc{};
    if (op == "Transpose" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      if (!only(0)) return mix_unknown(n, op, "its shape operand");
      const Loc l = in_loc(0);
      if (op == "Transpose") {
        std::vector<std::int64_t> perm = c.ints("perm");
        if (perm.empty())
          for (int k = r0 - 1; k >= 0; --k) perm.push_back(k);
        for (std::size_t k = 0; k < perm.size(); ++k)
          if (norm_axis(perm[k], r0) == l.axis) return Loc{true, static_cast<int>(k), l.inner};
        return mix_unknown(n, op, "");
      }
      const std::optional<Loc> m = by_stride(stride_of(l, c.x(0).shape()), c.out[0].t.shape());
      if (!m) mixes(n, "it reshapes " + where(l, c.x(0)) + " to " + shape_str(c.out[0].t) + ", which splits each sample's entries over several axes");
      return m;
    }
    if (op == "Slice") {
      if (!only(0)) return mix_unknown(n, op, "its starts, ends or steps");
      const Loc l = in_loc(0);
      const std::int64_t dim = c.x(0).shape()[l.axis];
      std::vector<std::int64_t> axes = c.has(3) ? c.int_values(3) : std::vector<std::int64_t>{};
      const std::vector<std::int64_t> starts = c.int_values(1), steps = c.has(4) ? c.int_values(4) : std::vector<std::int64_t>{};
      if (axes.empty())
        for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
      for (std::size_t k = 0; k < axes.size(); ++k)
        if (norm_axis(axes[k], r0) == l.axis && (c.out[0].t.shape()[l.axis] != dim || (k < steps.size() && steps[k] != 1)))
          return mixed(n, "it slices " + axis_of(l, c.x(0)) + ": a sample's position would change with the micro-batch");
      return l;
    }
    if (op == "Split" || op == "Concat") {
      const int axis = norm_axis(c.i("axis", 0), r0);
      const std::optional<Loc> l = broadcast(c, with, r0);
      if (!l) return std::nullopt;
      if (l->axis == axis)
        return mixed(n, std::string(op == "Split" ? "it splits" : "it concatenates along") +  " " + axis_of(*l, c.x(with[0])));
      return l;
    }
    if (op == "Gather" || op == "GatherElements") {
      const int axis = norm_axis(c.i("axis", 0), c.x(0).ndim());
      if (op == "GatherElements" || only(0)) {
        const std::optional<Loc> l = op == "GatherElements" ? broadcast(c, with, c.x(0).ndim()) : std::optional<Loc>(in_loc(0));
        if (!l) return std::nullopt;
        if (l->axis == axis) return mixed(n, "it gathers along " + axis_of(*l, c.x(with[0])));
        if (op == "GatherElements" || l->axis < axis) return l;
        return Loc{true, l->axis + c.x(1).ndim() - 1, l->inner};
      }
      if (!only(1)) return mix_unknown(n, op, "both its data and its indices");
      const Loc l = in_loc(1);  // the indices: the output's axes [axis, axis + rank(indices)) are theirs
      return Loc{true, axis + l.axis, l.inner};
    }
    if (op == "MatMul") {
      const int ra = c.x(0).ndim(), rb = c.x(1).ndim();
      if (ra < 2 || rb < 2) return mix_unknown(n, op, "a 1-d operand");
      std::optional<Loc> got;
      for (const std::size_t i : with) {
        Loc l = in_loc(i);
        const int r = i == 0 ? ra : rb;
        if ((i == 0 && l.axis == r - 1) || (i == 1 && l.axis == r - 2))
          return mixed(n, "it contracts " + axis_of(l, c.x(i)));
        l.axis += out_rank - r;
        if (got && !(*got == l)) return mixed(n, "it multiplies the samples of one operand by those of the other");
        got = l;
      }
      return got;
    }
    if (op == "Gemm") {
      if (!only(0)) return mix_unknown(n, op, "its B or C operand");
      const Loc l = in_loc(0);
      const int m_axis = c.i("transA", 0) ? 1 : 0;
      if (l.axis != m_axis) return mixed(n, "it contracts " + axis_of(l, c.x(0)));
      return Loc{true, 0, l.inner};
    }
    if (op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      if (!only(0) || in_loc(0).axis != 0) return mix_unknown(n, op, "its samples off axis 0, or in its weights");
      return in_loc(0);
    }
    if (op == "BatchNormalization") {
      if (!only(0)) return mix_unknown(n, op, "its scale, bias or statistics");
      const Loc l = in_loc(0);
      if (c.g.options.training) {
        if (!lead(l, c.x(0))) return mixed(n, "batch statistics with the samples off axis 0: " + where(l, c.x(0)));
        rep_.batch_statistics = true;
      }
      return l;
    }
    if (op == "LayerNormalization" || op == "Softmax" || op == "LogSoftmax") {
      if (!only(0)) return mix_unknown(n, op, "its scale or bias");
      const Loc l = in_loc(0);
      const int axis = norm_axis(c.i("axis", -1), r0);
      if (op == "LayerNormalization" ? l.axis >= axis : l.axis == axis)
        return mixed(n, "it normalises over " + axis_of(l, c.x(0)));
      return l;
    }
    if (op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin" || op == "CumSum" || op == "Trilu") {
      if (!only(0)) return mix_unknown(n, op, "its axes operand");
      const Loc l = in_loc(0);
      std::vector<int> axes;
      bool keep = c.i("keepdims", 1) != 0;
      if (op == "ArgMax" || op == "ArgMin") {
        axes.push_back(norm_axis(c.i("axis", 0), r0));
      } else if (op == "CumSum") {
        axes.push_back(norm_axis(c.int_values(1).at(0), r0));
        keep = true;
      } else if (op == "Trilu") {
        axes = {r0 - 2, r0 - 1};
        keep = true;
      } else {
        std::vector<std::int64_t> a = (op == "ReduceSum" || c.g.opset >= 18) ? (c.has(1) ? c.int_values(1) : std::vector<std::int64_t>{}) : c.ints("axes");
        if (a.empty() && c.i("noop_with_empty_axes", 0)) return l;
        for (const std::int64_t k : a) axes.push_back(norm_axis(k, r0));
        if (a.empty())
          for (int k = 0; k < r0; ++k) axes.push_back(k);
      }
      if (std::find(axes.begin(), axes.end(), l.axis) != axes.end())
        return mixed(n, (op == "Trilu" ? "it masks by position along " : "it reduces or scans along ") + axis_of(l, c.x(0)));
      Loc o = l;
      if (!keep) o.axis -= static_cast<int>(std::count_if(axes.begin(), axes.end(), [&](int a) { return a < l.axis; }));
      return o;
    }
    if (op == "LSTM" || op == "GRU") {
      const bool batch_major = c.i("layout", 0) != 0;
      const int want = batch_major ? 0 : 1;  // X [N, T, I] or [T, N, I]; h0, c0 [N, D, H] or [D, N, H]
      for (const std::size_t i : with)
        if (!(i == 0 || i == 5 || i == 6) || in_loc(i).axis != want || in_loc(i).inner != 1 ||
            c.x(i).shape()[in_loc(i).axis] != n_)
          return mix_unknown(n, op, "samples off the batch axis of its layout (input " + std::to_string(i) + ")");
      return Loc{true, want, 1};  // per output in out_loc
    }
    // elementwise, with broadcasting
    static const char* const elementwise[] = {
        "Abs", "Add", "And", "Cast", "Ceil", "Celu", "Clip", "Cos", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Floor", "Greater",
        "HardSigmoid", "HardSwish", "Identity", "LeakyRelu", "Less", "Log", "Max", "Mean", "Min", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal",
        "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where",
        "Xor"};
    if (std::find_if(std::begin(elementwise), std::end(elementwise), [&](const char* s) { return op == s; }) != std::end(elementwise))
      return broadcast(c, with, out_rank);
    return mix_unknown(n, op, "");
  }

  std::optional<Loc> mix_unknown(const Node& n, const std::string& op, const std::string& what) {
    mixes(n, "bitgrad cannot follow the samples through " + op + (what.empty() ? std::string() : " with " + what) +
                 ", so it cannot show that the node keeps them apart");
    return std::nullopt;
  }

  // the samples of output `o` (recurrent layers' outputs differ in layout)
  Loc out_loc(const Call& c, const std::string& op, std::size_t o, const Loc& l) const {
    if (op == "BatchNormalization") return o == 0 ? l : Loc{};  // then the running statistics
    if (op != "LSTM" && op != "GRU") return l;
    const bool batch_major = c.i("layout", 0) != 0;  // Y [N, T, D, H] or [T, D, N, H]; Y_h, Y_c [N, D, H] or [D, N, H]
    if (batch_major) return Loc{true, 0, 1};
    return Loc{true, o == 0 ? 2 : 1, 1};
  }
};

}  // namespace

std::string SampleAnalysis::mode_name(Mode m) {
  switch (m) {
    case Mode::batch_rule: return "batch_rule";
    case Mode::per_block: return "per_block";
    case Mode::mixes_samples: return "mixes_samples";
  }
  return "?";
}

SampleAnalysis analyze_samples(const GraphInfo& g, const Shape& input) {
  BITGRAD_CHECK(g.input_slots.size() == 1, g.where().c_str(), "the samples are followed from the graph's one input; it has ", g.input_slots.size());
  BITGRAD_CHECK(input.ndim() >= 1 && input[0] >= 2, g.where().c_str(), "the samples are followed at a probe of at least 2 samples, got ", input.str());
  Follower f(g, input[0]);
  f.input(g.input_slots[0]);
  NoGradGuard no_grad;
  const Tensor zeros = Tensor::zeros(input, storage_of(g.input_info[0]->elem_type, g.where()));
  nn::Context ctx;
  ctx.training = false;  // shapes only: no running statistics moved, no dropout drawn
  const NodeObserver obs = [&](const Call& c) { f.node(c); };
  const std::vector<Tensor> out = run_graph(g, {zeros}, ctx, &obs);
  return f.finish(out);
}

}  // namespace bitgrad::onnx
