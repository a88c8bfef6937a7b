#include "model/arithmetic.h"

#include <cmath>

#include "model/attention_group.h"
#include "model/cuda/kernels.h"
#include "model/hyper_connection.h"
#include "model/moe.h"
#include "model/moe_grouped.h"
#include "model/ops.h"
#include "model/quant.h"
#include "model/weights.h"

namespace deepinfer::model {

const Arithmetic& Arithmetic::official() {
  static const Arithmetic instance;
  return instance;
}

at::Tensor Arithmetic::linear(const at::Tensor& x, const at::Tensor& w) const { return at::linear(x, w); }

at::Tensor Arithmetic::linear_fp8(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale) const {
  if (cuda::fp8_linear_supported(x, codes, scale)) return cuda::fp8_linear(x, codes, scale);
  return at::linear(x, dequant_fp8_scaled(codes, scale, x.scalar_type()));
}

at::Tensor Arithmetic::linear(const at::Tensor& x, const Linear& w) const {
  return w.fp8() ? linear_fp8(x, w.weight, w.scale) : linear(x, w.weight);
}

at::Tensor Arithmetic::group_linear(const at::Tensor& x, const at::Tensor& w) const {
  const int64_t T = x.size(0), G = x.size(1);
  return at::bmm(x.transpose(0, 1), w.transpose(1, 2)).transpose(0, 1).reshape({T, G * w.size(1)});
}

at::Tensor Arithmetic::group_linear(const at::Tensor& x, const Linear& w) const {
  const int64_t G = x.size(1), N = w.weight.size(0) / G, K = x.size(2);
  if (!w.fp8()) return group_linear(x, w.weight.view({G, N, K}));
  if (N % kFp8Block != 0) return group_linear(x, dequant_fp8_scaled(w.weight, w.scale, x.scalar_type()).view({G, N, K}));
  std::vector<at::Tensor> groups;
  for (int64_t g = 0; g < G; ++g)
    groups.push_back(linear_fp8(x.select(1, g), w.weight.narrow(0, g * N, N), w.scale.narrow(0, g * N / kFp8Block, N / kFp8Block)));
  return at::cat(groups, 1);
}

at::Tensor Arithmetic::swiglu_mlp(const at::Tensor& x, const Linear& w1, const Linear& w2, const Linear& w3, double limit) const {
  return linear(swiglu_hidden(linear(x, w1), linear(x, w3), limit), w2);
}

at::Tensor Arithmetic::swiglu_mlp(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& w3,
                                  double limit) const {
  return linear(swiglu_hidden(linear(x, w1), linear(x, w3), limit), w2);
}

at::Tensor Arithmetic::rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const { return model::rms_norm(x, weight, eps); }

at::ScalarType Arithmetic::rope_table_dtype(at::ScalarType) const { return at::kFloat; }

at::Tensor Arithmetic::hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const {
  const at::Tensor flat = streams.flatten(1).to(at::kFloat);  // [T, n D]
  const at::Tensor inv_rms = at::rsqrt(flat.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return at::linear(flat, fn) * inv_rms;  // the projection scaled, as the official code does
}

at::Tensor Arithmetic::sinkhorn(const at::Tensor& logits, int64_t iters, double eps) const { return model::sinkhorn(logits, iters, eps); }

at::Tensor Arithmetic::hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) const {
  if (mixes_in_place(streams) && y.scalar_type() == at::kBFloat16) return cuda::hc_post(streams, y.contiguous(), mix.post, mix.comb);
  return model::hc_expand(streams, y, mix);
}

at::ScalarType Arithmetic::router_dtype(at::ScalarType) const { return at::kFloat; }

at::Tensor Arithmetic::routed_experts(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                      const at::Tensor& routing_weights, ExpertWorkspace* workspace) const {
  if (workspace != nullptr && workspace->usable(weights, layer, x))
    return workspace->routed_partial(weights, layer, x, experts, routing_weights);
  return routed_experts_loop(*this, weights, layer, x, experts, routing_weights);
}

bool Arithmetic::sums_slots_after_exchange() const { return false; }

at::Tensor Arithmetic::routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                    const at::Tensor& routing_weights, ExpertWorkspace*) const {
  return routed_slots_loop(*this, weights, layer, x, experts, routing_weights);
}

at::ScalarType Arithmetic::moe_sum_dtype(at::ScalarType) const { return at::kFloat; }

at::Tensor Arithmetic::pool_windows(const at::Tensor& kv, const at::Tensor& score, at::ScalarType) const {
  return (at::softmax(score, 2) * kv).sum(2);  // float32
}

at::Tensor Arithmetic::index_scores(const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& index_keys) const {
  const int64_t B = index_q.size(0), lt = index_q.size(1), Ih = index_q.size(2), Id = index_q.size(3), E = index_keys.size(1);
  const at::Tensor w = index_w / std::sqrt(static_cast<double>(Ih));
  const at::Tensor dots = at::matmul(index_q.reshape({B, lt * Ih, Id}), index_keys.transpose(1, 2));  // [B, lt Ih, E] model dtype
  const at::Tensor scores = (at::relu(dots.to(at::kFloat)).view({B, lt, Ih, E}) * w.unsqueeze(-1)).sum(2);
  return scores / std::sqrt(static_cast<double>(Id));
}

at::Tensor Arithmetic::attend(const AttentionLayer& layer, const SequenceGroup& group, const GroupKeys& keys, const GroupQueries& queries,
                              const AttentionOptions& options) const {
  return attend_tiled(*this, layer, group, keys, queries, options);
}

bool Arithmetic::attends_in_place(const at::Tensor& q, const at::Tensor& window) const {
  return cuda::sparse_attention_supported(q, window);
}

bool Arithmetic::mixes_in_place(const at::Tensor& streams) const { return cuda::hc_supported(streams); }

bool Arithmetic::ropes_in_place(const at::Tensor& x) const { return cuda::norm_rope_supported(x); }

bool Arithmetic::compresses_in_place(const at::Tensor& paged, const at::Tensor& tail_kv) const {
  return cuda::compressor_supported(paged, tail_kv);
}

}  // namespace deepinfer::model
