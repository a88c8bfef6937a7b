#include "model/reference/transformers_arithmetic.h"

#include <cmath>
#include <limits>
#include <vector>

#include "model/attention_group.h"
#include "model/hyper_connection.h"
#include "model/moe.h"
#include "model/ops.h"

namespace deepinfer::model::reference {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

const Arithmetic& transformers_arithmetic() {
  static const TransformersArithmetic instance;
  return instance;
}

at::Tensor TransformersArithmetic::rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const {
  const at::ScalarType dt = x.scalar_type();
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor inv = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (!weight.defined()) return x * inv.to(dt);
  return weight.to(dt) * (xf * inv).to(dt);
}

at::Tensor TransformersArithmetic::hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const {
  const at::Tensor flat = streams.flatten(1).to(at::kFloat);  // [T, n D]
  return at::linear(flat * at::rsqrt(flat.pow(2).mean(-1, /*keepdim=*/true) + eps), fn);
}

at::Tensor TransformersArithmetic::sinkhorn(const at::Tensor& logits, int64_t iters, double eps) const {
  return sinkhorn_reference(logits, iters, eps);  // ATen's op sequence (the CUDA kernel rounds in its own order)
}

at::Tensor TransformersArithmetic::hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) const {
  const at::ScalarType dt = streams.scalar_type();
  return mix.post.to(dt).unsqueeze(-1) * y.to(dt).unsqueeze(1) + at::bmm(mix.comb.to(dt).transpose(1, 2), streams);
}

// transformers' eager experts loop: one [w1; w3] matmul per expert (its gate_up_proj), the weighted
// outputs index_add_-ed into a zeros tensor of the model dtype.
at::Tensor TransformersArithmetic::routed_experts(const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                                                  const at::Tensor& experts, const at::Tensor& routing_weights, ExpertWorkspace*) const {
  const double limit = weights.config().swiglu_limit;
  at::Tensor out = at::zeros({x.size(0), x.size(1)}, x.options());
  for_each_owned_expert(weights, experts, [&](int64_t e, const at::Tensor& tokens, const at::Tensor& pairs) {
    const at::Tensor w1 = weights.expert_matrix(layer, e, "w1"), w3 = weights.expert_matrix(layer, e, "w3");
    const at::Tensor gate_up = at::linear(x.index_select(0, tokens), at::cat({w1, w3}, 0));
    const at::Tensor y = swiglu_down(gate_up.narrow(-1, 0, w1.size(0)), gate_up.narrow(-1, w1.size(0), w3.size(0)),
                                     weights.expert_matrix(layer, e, "w2"), limit);
    const at::Tensor w = routing_weights.reshape(-1).index_select(0, pairs).unsqueeze(1);
    out.index_add_(0, tokens, y * w.to(y.scalar_type()));
  });
  return out.to(at::kFloat);
}

at::Tensor TransformersArithmetic::pool_windows(const at::Tensor& kv, const at::Tensor& score, at::ScalarType dtype) const {
  return (kv.to(dtype) * at::softmax(score, 2).to(dtype)).sum(2);
}

at::Tensor TransformersArithmetic::index_scores(const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& index_keys) const {
  const auto Ih = static_cast<double>(index_q.size(2)), Id = static_cast<double>(index_q.size(3));
  const at::Tensor dots = at::matmul(index_q.to(at::kFloat), index_keys.transpose(1, 2).to(at::kFloat).unsqueeze(1));  // [B, lt, Ih, E]
  return (at::relu(dots) * std::pow(Id, -0.5) * (index_w * std::pow(Ih, -0.5)).unsqueeze(-1)).sum(2);
}

// A one-sequence group (B = 1) runs transformers' exact matmul shapes: keys = the min(p, W-1)
// positions its sliding cache holds before the run, the run's rows, then every compressed entry
// (masked per query: causal, window, and for CSA the indexer's picks); one [B, H, L, K] score
// matmul in the model dtype, scaled in it, the sink's softmax in float32 after subtracting the row
// max, P rounded, one P.V matmul. Untiled (query_tile unused): O(L (L + W + E)) per head, fine for
// the comparisons this arithmetic exists for. No part clock.
at::Tensor TransformersArithmetic::attend(const AttentionLayer& info, const SequenceGroup& group, const GroupKeys& keys,
                                          const GroupQueries& queries, const AttentionOptions&) const {
  const at::Tensor& q = queries.q;
  const int64_t B = q.size(0), L = q.size(1), H = info.heads, d = info.head_dim, W = info.window;
  const auto i64 = group.start.options();
  const int64_t prior = std::min(group.max_end - L, W - 1);
  const at::Tensor p = group.start.view({B, 1});
  const at::Tensor key_pos = p - prior + at::arange(prior + L, i64);                 // [B, prior + L]
  at::Tensor k = gather_rows(keys.window_pool, window_pool_rows(key_pos, p, W, L));  // [B, prior + L, d]
  const at::Tensor qp = group.positions.unsqueeze(-1), kp = key_pos.unsqueeze(1);
  std::vector<at::Tensor> visible{(kp >= 0) & (kp <= qp) & (kp > qp - W)};  // [B, L, prior + L]
  if (keys.entries.defined()) {
    const int64_t E = keys.entries.size(1);
    at::Tensor seen = at::arange(E, i64) < at::div(group.positions + 1, info.ratio, "floor").unsqueeze(-1);  // [B, L, E]
    if (info.csa) {
      auto [picked, real] = index_topk(*this, info, keys, queries.index_q, queries.index_w, seen);
      seen = at::zeros_like(seen).scatter(-1, picked, real);
    }
    k = at::cat({k, keys.entries}, 1);
    visible.push_back(seen);
  }
  const int64_t K = k.size(1);
  const at::Tensor qh = q.transpose(1, 2).contiguous();       // [B, H, L, d]
  const at::Tensor kh = k.unsqueeze(1).expand({B, H, K, d});  // the single KV head over H heads, a stride-0 view as repeat_kv gives
  at::Tensor logits = at::matmul(qh, kh.transpose(2, 3)).mul(std::pow(static_cast<double>(d), -0.5)).to(at::kFloat);
  logits = logits.masked_fill(~at::cat(visible, -1).unsqueeze(1), kNegInf);
  at::Tensor combined = at::cat({logits, info.sink.view({1, H, 1, 1}).expand({B, H, L, 1})}, -1);
  combined = combined - std::get<0>(combined.max(-1, /*keepdim=*/true));
  const at::Tensor probs = at::softmax(combined, -1).narrow(-1, 0, K).to(q.scalar_type());
  return at::matmul(probs, kh).transpose(1, 2);
}

}  // namespace deepinfer::model::reference
