#include "tests/model/dense_reference.h"

#include <cmath>
#include <limits>

#include "model/weight_specs.h"

namespace deepinfer::model::testing {
namespace {

using at::Tensor;

class Reference {
 public:
  explicit Reference(const ModelWeights& weights) : w_(weights), c_(weights.config()) {
    TORCH_CHECK(c_.scoring_func == ScoringFunc::kSqrtSoftplus, "dense reference: only sqrtsoftplus routing");
  }

  Tensor logits(const std::vector<int64_t>& tokens) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    const int64_t n = c_.hc_mult, D = c_.hidden_size;
    token_ids_ = at::tensor(tokens, at::kLong);
    positions_.clear();
    for (int64_t t = 0; t < T; ++t) positions_.push_back(t);
    Tensor X = get("embed.weight").index_select(0, token_ids_).unsqueeze(1).repeat({1, n, 1});  // [T, n, D]
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const std::string p = layer_prefix(l);
      X = hc_site(X, p + "hc_attn_", [&](const Tensor& x) { return attention(l, norm(x, get(p + "attn_norm.weight"))); });
      X = hc_site(X, p + "hc_ffn_", [&](const Tensor& x) { return moe(l, norm(x, get(p + "ffn_norm.weight"))); });
    }
    const Tensor f = X.reshape({T, n * D});
    const Tensor mix = at::matmul(f, get("hc_head_fn").t()) / at::sqrt((f * f).mean(-1, true) + c_.rms_norm_eps);
    const Tensor pre = at::sigmoid(mix * get("hc_head_scale") + get("hc_head_base")) + c_.hc_eps;
    const Tensor h = (pre.unsqueeze(-1) * X).sum(1);
    return at::matmul(norm(h, get("norm.weight")), get("head.weight").t());
  }

 private:
  Tensor get(const std::string& name) const { return w_.get(name).to(at::kFloat); }

  Tensor norm(const Tensor& x, const Tensor& weight) const {
    Tensor y = x / at::sqrt((x * x).mean(-1, true) + c_.rms_norm_eps);
    return weight.defined() ? y * weight : y;
  }

  // Frequencies of the main (ratio 0) or compress (YaRN) rope, per the spec's formulas.
  std::vector<float> frequencies(bool compress) const {
    const int64_t r = c_.rope_head_dim;
    const double base = compress ? c_.compress_rope_theta : c_.rope_theta;
    double low = 0, high = 0;
    if (compress) {
      auto cd = [&](double rot) {
        return r * std::log(c_.yarn.original_max_position_embeddings / (rot * 2 * M_PI)) / (2 * std::log(base));
      };
      low = std::max(std::floor(cd(c_.yarn.beta_fast)), 0.0);
      high = std::min(std::ceil(cd(c_.yarn.beta_slow)), static_cast<double>(r - 1));
      if (high == low) high += 0.001;
    }
    std::vector<float> out;
    for (int64_t i = 0; i < r / 2; ++i) {
      const double f = std::pow(base, -2.0 * i / r);
      if (!compress) {
        out.push_back(static_cast<float>(f));
        continue;
      }
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      out.push_back(static_cast<float>(f / c_.yarn.factor * ramp + f * (1 - ramp)));
    }
    return out;
  }

  // Rotates the last r channels of x [N, ..., dim] by e^{i pos_n f} (conjugate if inverse),
  // pairs (2i, 2i+1) as complex numbers. Angles in float32 as the references compute them.
  Tensor rope(const Tensor& x, const std::vector<int64_t>& pos, bool compress, bool inverse = false) const {
    const int64_t r = c_.rope_head_dim, dim = x.size(-1), N = x.size(0);
    const std::vector<float> f = frequencies(compress);
    std::vector<float> angles;
    for (int64_t i = 0; i < N; ++i) {
      for (float fi : f) angles.push_back(static_cast<float>(pos[i]) * fi * (inverse ? -1.0f : 1.0f));
    }
    std::vector<int64_t> angle_shape(x.dim(), 1);
    angle_shape[0] = N;
    angle_shape.back() = r / 2;
    const Tensor angle = at::tensor(angles, at::kFloat).view(angle_shape);
    const Tensor rotor = at::polar(at::ones_like(angle), angle);
    std::vector<int64_t> pair_shape(x.sizes().begin(), x.sizes().end());
    pair_shape.back() = r / 2;
    pair_shape.push_back(2);
    const Tensor z = at::view_as_complex(x.narrow(-1, dim - r, r).contiguous().view(pair_shape)) * rotor;
    return at::cat({x.narrow(-1, 0, dim - r), at::view_as_real(z).flatten(-2)}, -1);
  }

  template <typename Fn>
  Tensor hc_site(const Tensor& X, const std::string& p, Fn block) const {
    const int64_t T = X.size(0), n = c_.hc_mult;
    const Tensor fn = get(p + "fn"), base = get(p + "base"), scale = get(p + "scale");
    const Tensor f = X.reshape({T, -1});
    const Tensor mix = at::matmul(f, fn.t()) / at::sqrt((f * f).mean(-1, true) + c_.rms_norm_eps);
    const Tensor pre = at::sigmoid(mix.slice(1, 0, n) * scale[0] + base.slice(0, 0, n)) + c_.hc_eps;
    const Tensor post = 2 * at::sigmoid(mix.slice(1, n, 2 * n) * scale[1] + base.slice(0, n, 2 * n));
    Tensor C = at::softmax(mix.slice(1, 2 * n).reshape({T, n, n}) * scale[2] + base.slice(0, 2 * n).reshape({n, n}), -1) + c_.hc_eps;
    C = C / (C.sum(1, true) + c_.hc_eps);
    for (int64_t it = 1; it < c_.hc_sinkhorn_iters; ++it) {
      C = C / (C.sum(2, true) + c_.hc_eps);
      C = C / (C.sum(1, true) + c_.hc_eps);
    }
    const Tensor y = block((pre.unsqueeze(-1) * X).sum(1));
    return post.unsqueeze(-1) * y.unsqueeze(1) + at::einsum("tjk,tjd->tkd", {C, X});
  }

  // Compressed entries [T/m, dim] of a full sequence, window by window.
  Tensor compress(const Tensor& x, const std::string& p, int64_t m, bool overlap, int64_t dim) const {
    const int64_t T = x.size(0);
    const Tensor K = at::matmul(x, get(p + "wkv.weight").t());
    Tensor Z = at::matmul(x, get(p + "wgate.weight").t());
    const Tensor ape = get(p + "ape");
    for (int64_t t = 0; t < T; ++t) Z[t] += ape[t % m];
    std::vector<Tensor> entries;
    std::vector<int64_t> entry_pos;
    for (int64_t w = 0; w < T / m; ++w) {
      Tensor keys, gates;
      if (!overlap) {
        keys = K.slice(0, w * m, (w + 1) * m);
        gates = Z.slice(0, w * m, (w + 1) * m);
      } else {
        keys = K.slice(0, w * m, (w + 1) * m).slice(1, dim, 2 * dim);
        gates = Z.slice(0, w * m, (w + 1) * m).slice(1, dim, 2 * dim);
        if (w > 0) {  // the previous window's first halves join (weight 0 for w = 0)
          keys = at::cat({K.slice(0, (w - 1) * m, w * m).slice(1, 0, dim), keys});
          gates = at::cat({Z.slice(0, (w - 1) * m, w * m).slice(1, 0, dim), gates});
        }
      }
      entries.push_back((at::softmax(gates, 0) * keys).sum(0));
      entry_pos.push_back(w * m);
    }
    if (entries.empty()) return at::zeros({0, dim});
    return rope(norm(at::stack(entries), get(p + "norm.weight")), entry_pos, /*compress=*/true);
  }

  Tensor attention(int64_t l, const Tensor& x) const {
    const std::string p = layer_prefix(l) + "attn.";
    const int64_t T = x.size(0), H = c_.num_heads, d = c_.head_dim, W = c_.sliding_window, m = c_.compress_ratio(l);
    const bool compressed_rope = m > 0;
    const Tensor qr = norm(at::matmul(x, get(p + "wq_a.weight").t()), get(p + "q_norm.weight"));
    Tensor q = norm(at::matmul(qr, get(p + "wq_b.weight").t()).view({T, H, d}), Tensor());
    q = rope(q, positions_, compressed_rope);
    const Tensor kv = rope(norm(at::matmul(x, get(p + "wkv.weight").t()), get(p + "kv_norm.weight")), positions_, compressed_rope);
    Tensor entries = at::zeros({0, d});
    if (m > 0) entries = compress(x, p + "compressor.", m, c_.layer_type(l) == LayerType::kCsa, d);
    const int64_t E = entries.size(0);
    // allowed[t, j]: window keys j in [t-W+1, t]; entries per layer type.
    Tensor allowed = at::zeros({T, T + E}, at::kBool);
    for (int64_t t = 0; t < T; ++t) allowed[t].slice(0, std::max<int64_t>(0, t - W + 1), t + 1).fill_(true);
    if (E > 0 && c_.layer_type(l) == LayerType::kHca) {
      for (int64_t t = 0; t < T; ++t) allowed[t].slice(0, T, T + (t + 1) / m).fill_(true);
    } else if (E > 0) {
      const int64_t Ih = c_.index_n_heads, Id = c_.index_head_dim;
      const Tensor ikeys = compress(x, p + "indexer.compressor.", m, true, Id);
      const Tensor iq = rope(at::matmul(qr, get(p + "indexer.wq_b.weight").t()).view({T, Ih, Id}), positions_, true);
      const Tensor iw = at::matmul(x, get(p + "indexer.weights_proj.weight").t()) / std::sqrt(static_cast<double>(Ih));
      Tensor score = (at::relu(at::einsum("thd,ed->the", {iq, ikeys})) * iw.unsqueeze(-1)).sum(1) / std::sqrt(static_cast<double>(Id));
      for (int64_t t = 0; t < T; ++t) score[t].slice(0, (t + 1) / m).fill_(-std::numeric_limits<float>::infinity());
      auto [top, idx] = score.topk(std::min(c_.index_topk, E), 1);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t k = 0; k < idx.size(1); ++k) {
          if (std::isfinite(top[t][k].item<float>())) allowed[t][T + idx[t][k].item<int64_t>()] = true;
        }
      }
    }
    const Tensor keys = at::cat({kv, entries});                                           // [T + E, d]
    Tensor s = at::einsum("thd,jd->htj", {q, keys}) / std::sqrt(static_cast<double>(d));  // [H, T, T+E]
    s = s.masked_fill(~allowed.unsqueeze(0), -std::numeric_limits<float>::infinity());
    const Tensor sink = get(p + "attn_sink").view({H, 1, 1});
    const Tensor M = at::maximum(std::get<0>(s.max(-1, true)), sink);
    const Tensor num = at::exp(s - M);
    const Tensor prob = num / (num.sum(-1, true) + at::exp(sink - M));
    Tensor o = at::einsum("htj,jd->thd", {prob, keys});
    o = rope(o, positions_, compressed_rope, /*inverse=*/true);
    const int64_t G = c_.o_groups, per = H / G;
    const Tensor wo_a = get(p + "wo_a.weight");
    std::vector<Tensor> z;
    for (int64_t g = 0; g < G; ++g) {
      z.push_back(at::matmul(o.slice(1, g * per, (g + 1) * per).reshape({T, per * d}),
                             wo_a.slice(0, g * c_.o_lora_rank, (g + 1) * c_.o_lora_rank).t()));
    }
    return at::matmul(at::cat(z, 1), get(p + "wo_b.weight").t());
  }

  Tensor expert(const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3) const {
    const double L = c_.swiglu_limit;
    const Tensor g = at::matmul(x, w1.t()).clamp_max(L);
    const Tensor u = at::matmul(x, w3.t()).clamp(-L, L);
    return at::matmul(g * at::sigmoid(g) * u, w2.t());
  }

  Tensor moe(int64_t l, const Tensor& x) const {
    const std::string p = layer_prefix(l) + "ffn.";
    const int64_t T = x.size(0), E = c_.n_routed_experts;
    const Tensor s = at::sqrt(at::softplus(at::matmul(x, get(p + "gate.weight").t())));
    const Tensor idx = c_.is_hash_layer(l) ? w_.get(p + "gate.tid2eid").index_select(0, token_ids_)
                                           : std::get<1>((s + get(p + "gate.bias")).topk(c_.num_experts_per_tok, 1));
    Tensor wts = s.gather(1, idx);
    wts = wts / wts.sum(1, true) * c_.routed_scaling_factor;
    const Tensor per_expert = at::zeros({T, E}).scatter_add(1, idx, wts);
    Tensor y = expert(x, get(p + "shared_experts.w1.weight"), get(p + "shared_experts.w2.weight"), get(p + "shared_experts.w3.weight"));
    for (int64_t e = 0; e < E; ++e) {
      auto mat = [&](const char* which) { return w_.expert_matrix(l, e, which).to(at::kFloat); };
      y = y + per_expert.slice(1, e, e + 1) * expert(x, mat("w1"), mat("w2"), mat("w3"));
    }
    return y;
  }

  const ModelWeights& w_;
  const ModelConfig& c_;
  Tensor token_ids_;
  std::vector<int64_t> positions_;
};

}  // namespace

at::Tensor dense_reference_logits(const ModelWeights& weights, const std::vector<int64_t>& tokens) {
  return Reference(weights).logits(tokens);
}

}  // namespace deepinfer::model::testing
