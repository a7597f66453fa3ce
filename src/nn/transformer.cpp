// Transformer layers, built from the canonical ops (docs/numerics.md §21): every sum they do is
// one of the ops' documented orders, and nothing in them reduces across samples except the
// parameter gradients, which the ops reduce per sample first (§3).
#include <limits>
#include <sstream>

#include "bitgrad/math.hpp"
#include "bitgrad/nn.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::init_stream;
using detail::str;
namespace {

void fill_normal(Tensor& t, double stddev, const rng::Stream& s) {
  NoGradGuard ng;
  BITGRAD_DISPATCH_FLOAT(t.dtype(), "init", T, [&] { s.fill_normal(t.mutable_data<T>(), t.numel(), 0, T(0), static_cast<T>(stddev)); });
}

// Inverted dropout keyed as nn::Dropout: stream (seed, "dropout").sub(id).sub(step) (.sub(call) for
// a later call of the block in one forward), element index from the micro-batch's first global
// sample, so a sample's mask does not depend on the split.
Tensor drop(const Tensor& x, double p, std::uint64_t id, const Context& ctx) {
  if (!ctx.training || p == 0.0) return x;
  const std::int64_t rows = x.shape()[0];
  const std::int64_t row_size = rows ? x.numel() / rows : 0;
  rng::Stream s = rng::Stream(ctx.seed, "dropout").sub(id).sub(ctx.step);
  if (ctx.call) s = s.sub(ctx.call);
  return dropout(x, p, s, static_cast<std::uint64_t>(ctx.row_offset * row_size), ctx.f32_masks);
}

// [T, T]: 1 where key j may be seen by query i (j <= i)
Tensor causal_mask(std::int64_t T) {
  Tensor m = Tensor::zeros(Shape{T, T}, DType::u8);
  std::uint8_t* p = m.mutable_data<std::uint8_t>();
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j <= i; ++j) p[i * T + j] = 1;
  return m;
}

}  // namespace

// ---- TokenEmbedding ---------------------------------------------------------------------------------
TokenEmbedding::TokenEmbedding(std::int64_t vocab, std::int64_t block, std::int64_t dim, double dropout_p, std::uint64_t dropout_id)
    : p_(dropout_p), drop_id_(dropout_id) {
  BITGRAD_CHECK(vocab > 0 && block > 0 && dim > 0, "TokenEmbedding", "sizes must be positive, got vocabulary ", vocab, ", block ", block,
                ", dimension ", dim);
  BITGRAD_CHECK(dropout_p >= 0 && dropout_p < 1, "TokenEmbedding", "dropout must be in [0, 1), got ", dropout_p);
  wte = register_parameter("wte", Tensor::zeros(Shape{vocab, dim}));
  wpe = register_parameter("wpe", Tensor::zeros(Shape{block, dim}));
}
void TokenEmbedding::init(Init w, std::uint64_t seed, std::uint64_t& index) {
  const double sd = w == Init::gpt2 ? 0.02 : 1.0;  // otherwise as nn::Embedding: normal(0, 1)
  fill_normal(wte, sd, init_stream(seed, index));
  fill_normal(wpe, sd, init_stream(seed, index));
}
Tensor TokenEmbedding::forward(const Tensor& x, const Context& ctx) {
  BITGRAD_CHECK(x.ndim() == 2, describe().c_str(), "expects token ids [N, T], got ", x.shape().str());
  const std::int64_t T = x.shape()[1];
  BITGRAD_CHECK(T <= wpe.shape()[0], describe().c_str(), "sequences of ", T, " tokens are longer than block_size ", wpe.shape()[0]);
  Tensor ids = x;
  if (x.dtype() != DType::i64) {  // whole numbers in [0, vocabulary): a cast would truncate 2.5 to 2
    NoGradGuard ng;
    Tensor xc = contiguous(x);
    const std::int64_t V = wte.shape()[0];
    BITGRAD_DISPATCH_FLOAT(x.dtype(), "TokenEmbedding", F, [&] {
      const F* a = xc.data<F>();
      for (std::int64_t i = 0; i < x.numel(); ++i)
        BITGRAD_CHECK(a[i] >= 0 && a[i] < static_cast<F>(V) && a[i] == static_cast<F>(static_cast<std::int64_t>(a[i])), describe().c_str(),
                      "token id ", a[i], " at position ", i % T, " of sample ", i / T, " is not a token of the vocabulary [0, ", V, ")");
    });
    ids = xc.cast(DType::i64);
  }
  Tensor h = add(embedding(wte, ids), slice(wpe, 0, 0, T));
  return drop(h, p_, drop_id_, ctx);
}
Shape TokenEmbedding::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 2, describe().c_str(), "expects token ids [N, T], got ", in.str());
  BITGRAD_CHECK(in[1] <= wpe.shape()[0], describe().c_str(), "sequences of ", in[1], " tokens are longer than block_size ", wpe.shape()[0]);
  return Shape{in[0], in[1], wte.shape()[1]};
}
std::string TokenEmbedding::describe() const {
  return str("TokenEmbedding(", wte.shape()[0], ", ", wte.shape()[1], ", block=", wpe.shape()[0], p_ > 0 ? str(", dropout=", p_) : "", ")");
}

// ---- attention ------------------------------------------------------------------------------------------
// x [N, T, D] -> [N, T, D]; shapes in the comments, H heads of E = D / H
Tensor causal_self_attention(const Tensor& x, const Tensor& w_qkv, const Tensor& b_qkv, const Tensor& w_proj, const Tensor& b_proj,
                             std::int64_t n_head, double p, std::uint64_t dropout_id, const Context& ctx, std::uint64_t site,
                             std::uint64_t qkv_site, std::uint64_t proj_site) {
  BITGRAD_CHECK(x.ndim() == 3, "causal_self_attention", "expects x [N, T, D], got ", x.shape().str());
  const std::int64_t N = x.shape()[0], T = x.shape()[1], D = x.shape()[2];
  BITGRAD_CHECK(n_head > 0 && D % n_head == 0, "causal_self_attention", "n_embd ", D, " is not divisible by n_head ", n_head);
  const std::int64_t E = D / n_head;
  using detail::lowp;
  Tensor qkv = detail::lowp_linear(x, w_qkv, b_qkv, ctx, qkv_site);  // [N, T, 3D]
  auto head = [&](std::int64_t part) {      // [N, H, T, E]
    return permute(reshape(slice(qkv, 2, part * D, (part + 1) * D), Shape{N, T, n_head, E}), {0, 2, 1, 3});
  };
  Tensor q = head(0), k = head(1), v = head(2);
  // scores: chains over E (the GEMM), then one multiplication by 1/sqrt(E) rounded to the dtype
  // (mixed precision: q, k, v are the qkv linear's low-precision output; the product is
  // rounded, scaled in f32, the softmax is f32 and its result rounded for the second product)
  Tensor att = mul(lowp(matmul(q, transpose(k, 2, 3)), ctx, site, 0), 1.0 / math::sqrt(static_cast<double>(E)));  // [N, H, T, T]
  // masked: the most negative finite value of the dtype, not -inf, so that anomaly detection
  // sees no non-finite value; exp(lowest - max) is +0 as exp(-inf) is, so the weights are the same
  const double lowest = att.dtype() == DType::f32 ? static_cast<double>(std::numeric_limits<float>::lowest()) : std::numeric_limits<double>::lowest();
  att = where(causal_mask(T), att, Tensor::scalar(lowest, att.dtype()));
  att = softmax(att, -1);  // a masked position's weight is +0
  att = lowp(drop(att, p, dropout_id, ctx), ctx, site, 1);
  Tensor y = lowp(matmul(att, v), ctx, site, 2);                    // [N, H, T, E]
  y = reshape(contiguous(permute(y, {0, 2, 1, 3})), Shape{N, T, D});  // heads side by side
  return drop(detail::lowp_linear(y, w_proj, b_proj, ctx, proj_site), p, dropout_id + 1, ctx);
}

// ---- TransformerBlock -------------------------------------------------------------------------------
TransformerBlock::TransformerBlock(std::int64_t dim, std::int64_t n_head, double dropout_p, bool bias, std::int64_t n_layer,
                                   std::uint64_t dropout_id)
    : dim_(dim), n_head_(n_head), n_layer_(n_layer), p_(dropout_p), bias_(bias), drop_id_(dropout_id) {
  BITGRAD_CHECK(dim > 0 && n_head > 0, "TransformerBlock", "n_embd and n_head must be positive, got ", dim, " and ", n_head);
  BITGRAD_CHECK(dim % n_head == 0, "TransformerBlock", "n_embd ", dim, " is not divisible by n_head ", n_head);
  BITGRAD_CHECK(dropout_p >= 0 && dropout_p < 1, "TransformerBlock", "dropout must be in [0, 1), got ", dropout_p);
  ln1_ = std::make_shared<LayerNorm>(dim, 1e-5, bias);
  qkv_ = std::make_shared<Linear>(dim, 3 * dim, bias);
  proj_ = std::make_shared<Linear>(dim, dim, bias);
  ln2_ = std::make_shared<LayerNorm>(dim, 1e-5, bias);
  fc_ = std::make_shared<Linear>(dim, 4 * dim, bias);
  out_ = std::make_shared<Linear>(4 * dim, dim, bias);
  register_module("ln1", ln1_);
  register_module("attn_qkv", qkv_);
  register_module("attn_proj", proj_);
  register_module("ln2", ln2_);
  register_module("mlp_fc", fc_);
  register_module("mlp_proj", out_);
}
void TransformerBlock::init(Init w, std::uint64_t seed, std::uint64_t& index) {
  Module::init(w, seed, index);
  if (w != Init::gpt2) return;
  // GPT-2: the projections that add into the residual stream start smaller, by 1/sqrt(2 n_layer)
  const double sd = 0.02 / math::sqrt(2.0 * static_cast<double>(n_layer_));
  // each child holds `per` parameters, registered ln1, qkv, proj, ln2, fc, out: redraw the
  // projections' weights from their own streams
  const std::uint64_t per = bias_ ? 2 : 1, first = index - 6 * per;
  const std::uint64_t proj_w = first + 2 * per, out_w = first + 5 * per;
  fill_normal(proj_->weight, sd, rng::Stream(seed, "init").sub(proj_w));
  fill_normal(out_->weight, sd, rng::Stream(seed, "init").sub(out_w));
}
Tensor TransformerBlock::forward(const Tensor& x, const Context& ctx) {
  Tensor h = add(x, causal_self_attention(ln1_->forward(x, ctx), qkv_->weight, qkv_->bias, proj_->weight, proj_->bias, n_head_, p_,
                                          drop_id_, ctx, site(), qkv_->site(), proj_->site()));
  Tensor m = drop(out_->forward(gelu(fc_->forward(ln2_->forward(h, ctx), ctx)), ctx), p_, drop_id_ + 2, ctx);
  return add(h, m);
}
// Cached decoding: each sequence's new rows attend to its cached rows and to the new rows up to
// themselves, with the same products, scale, mask and softmax as a row of forward's attention
// (numerics §9), then the same projection and MLP; every op is row by row or per sequence, so a
// row's bits do not depend on the other sequences of the batch.
Tensor TransformerBlock::forward_rows(const Tensor& x, const std::vector<std::int64_t>& counts, const std::vector<KvCache*>& caches,
                                      const Context& ctx) {
  BITGRAD_CHECK(counts.size() == caches.size(), describe().c_str(), "forward_rows: ", counts.size(), " counts for ", caches.size(), " caches");
  BITGRAD_CHECK(x.ndim() == 2 && x.shape()[1] == dim_, describe().c_str(), "forward_rows expects rows [R, ", dim_, "], got ", x.shape().str());
  const std::int64_t D = dim_, H = n_head_, E = D / H;
  const double lowest = static_cast<double>(std::numeric_limits<float>::lowest());
  Tensor qkv = qkv_->forward(ln1_->forward(x, ctx), ctx);  // [R, 3D]
  std::vector<Tensor> ys;
  std::int64_t first = 0;
  for (std::size_t s = 0; s < caches.size(); ++s) {
    KvCache& c = *caches[s];
    const std::int64_t n = counts[s], p0 = c.rows;
    Tensor rows = slice(qkv, 0, first, first + n);
    first += n;
    Tensor kn = contiguous(slice(rows, 1, D, 2 * D)), vn = contiguous(slice(rows, 1, 2 * D, 3 * D));
    c.k = p0 == 0 ? kn : concat({c.k, kn}, 0);
    c.v = p0 == 0 ? vn : concat({c.v, vn}, 0);
    const std::int64_t L = c.rows = p0 + n;
    Tensor qh = permute(reshape(contiguous(slice(rows, 1, 0, D)), Shape{n, H, E}), {1, 0, 2});  // [H, n, E]
    Tensor kh = permute(reshape(c.k, Shape{L, H, E}), {1, 2, 0});                              // [H, E, L]
    Tensor vh = permute(reshape(c.v, Shape{L, H, E}), {1, 0, 2});                              // [H, L, E]
    // the window's attention rows p0 .. p0+n-1
    // the products rounded where forward rounds them (mixed precision; identities in f32)
    Tensor att = mul(detail::lowp(matmul(qh, kh), ctx, site(), 0), 1.0 / math::sqrt(static_cast<double>(E)));  // [H, n, L]
    Tensor mask = Tensor::zeros(Shape{n, L}, DType::u8);
    std::uint8_t* mp = mask.mutable_data<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j <= p0 + i; ++j) mp[i * L + j] = 1;
    att = detail::lowp(softmax(where(mask, att, Tensor::scalar(lowest, att.dtype())), -1), ctx, site(), 1);
    ys.push_back(reshape(contiguous(permute(detail::lowp(matmul(att, vh), ctx, site(), 2), {1, 0, 2})), Shape{n, D}));  // heads side by side
  }
  BITGRAD_CHECK(first == x.shape()[0], describe().c_str(), "forward_rows: the counts add up to ", first, " rows, x has ", x.shape()[0]);
  Tensor h = add(x, proj_->forward(concat(ys, 0), ctx));
  return add(h, out_->forward(gelu(fc_->forward(ln2_->forward(h, ctx), ctx)), ctx));
}

Shape TransformerBlock::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 3 && in[2] == dim_, describe().c_str(), "expects inputs [N, T, ", dim_, "], got ", in.str());
  return in;
}
std::string TransformerBlock::describe() const {
  return str("TransformerBlock(", dim_, ", heads=", n_head_, p_ > 0 ? str(", dropout=", p_) : "", bias_ ? "" : ", no bias", ")");
}

// ---- TiedHead -------------------------------------------------------------------------------------------
Tensor TiedHead::forward(const Tensor& x, const Context& ctx) { return detail::lowp_linear(x, weight_, Tensor(), ctx, site()); }
Shape TiedHead::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() >= 2 && in[in.ndim() - 1] == weight_.shape()[1], describe().c_str(), "expects inputs [..., ", weight_.shape()[1],
                "], got ", in.str());
  Shape o = in;
  o[o.ndim() - 1] = weight_.shape()[0];
  return o;
}
std::string TiedHead::describe() const { return str("TiedHead(", weight_.shape()[1], ", ", weight_.shape()[0], ")"); }

void TokenEmbedding::bind_parameters() {
  wte = own_parameter("wte");
  wpe = own_parameter("wpe");
}

}  // namespace bitgrad::nn
