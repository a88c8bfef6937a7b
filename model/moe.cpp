#include "model/moe.h"

#include "model/ops.h"

namespace deepinfer::model {
namespace {

at::Tensor expert_scores(const at::Tensor& logits, ScoringFunc func) {
  switch (func) {
    case ScoringFunc::kSqrtSoftplus: return at::sqrt(at::softplus(logits));
    case ScoringFunc::kSigmoid: return at::sigmoid(logits);
    case ScoringFunc::kSoftmax: return at::softmax(logits, -1);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown scoring function");
}

}  // namespace

void for_each_owned_expert(const ModelWeights& weights, const at::Tensor& experts, const ExpertVisitor& visit) {
  if (experts.size(0) == 0) return;
  const int64_t k = experts.size(1);
  const at::Tensor flat = experts.reshape(-1);
  const at::Tensor order = std::get<1>(flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  // One host read per layer: how many (token, slot) pairs each expert got.
  const at::Tensor counts = at::bincount(flat, /*weights=*/{}, weights.config().n_routed_experts).cpu();
  const int64_t* count = counts.data_ptr<int64_t>();
  const ExpertRange& owned = weights.experts();
  int64_t offset = 0;
  for (int64_t e = 0; e < owned.first; ++e) offset += count[e];
  for (int64_t e = owned.first; e < owned.last; ++e) {
    const int64_t n = count[e];
    if (n == 0) continue;
    const at::Tensor pairs = order.narrow(0, offset, n);  // flat (token * k + slot)
    offset += n;
    visit(e, at::div(pairs, k, "floor"), pairs);
  }
}

at::Tensor routed_experts_loop(const Arithmetic& arith, const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                               const at::Tensor& experts, const at::Tensor& routing_weights) {
  const ModelConfig& config = weights.config();
  at::Tensor out = at::zeros({x.size(0), x.size(1)}, x.options().dtype(at::kFloat));
  for_each_owned_expert(weights, experts, [&](int64_t e, const at::Tensor& tokens, const at::Tensor& pairs) {
    const at::Tensor y =
        arith.swiglu_mlp(x.index_select(0, tokens), weights.expert_matrix(layer, e, "w1"), weights.expert_matrix(layer, e, "w2"),
                         weights.expert_matrix(layer, e, "w3"), config.swiglu_limit);
    const at::Tensor w = routing_weights.reshape(-1).index_select(0, pairs).unsqueeze(1);
    out.index_add_(0, tokens, y.to(at::kFloat) * w);
  });
  return out;
}

at::Tensor routed_slots_loop(const Arithmetic& arith, const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                             const at::Tensor& experts, const at::Tensor& routing_weights) {
  const ModelConfig& config = weights.config();
  const int64_t N = x.size(0), k = experts.size(1), D = x.size(1);
  at::Tensor out = at::zeros({N * k, D}, x.options().dtype(at::kFloat));  // row token * k + slot
  for_each_owned_expert(weights, experts, [&](int64_t e, const at::Tensor& tokens, const at::Tensor& pairs) {
    const at::Tensor y =
        arith.swiglu_mlp(x.index_select(0, tokens), weights.expert_matrix(layer, e, "w1"), weights.expert_matrix(layer, e, "w2"),
                         weights.expert_matrix(layer, e, "w3"), config.swiglu_limit);
    const at::Tensor w = routing_weights.reshape(-1).index_select(0, pairs).unsqueeze(1);
    out.index_copy_(0, pairs, y.to(at::kFloat) * w);  // each pair once: no two writes meet
  });
  return out.view({N, k, D});
}

namespace {

// [T, k, D] float32 -> [T, D]: the k slots added in slot order from 0.
at::Tensor sum_slots(const at::Tensor& slots) {
  at::Tensor sum = at::zeros({slots.size(0), slots.size(2)}, slots.options());
  for (int64_t s = 0; s < slots.size(1); ++s) sum = sum + slots.select(1, s);
  return sum;
}

}  // namespace

Routing route_tokens(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids,
                     const Arithmetic& arith) {
  const ModelConfig& config = weights.config();
  const at::ScalarType dt = arith.router_dtype(x.scalar_type());
  const at::Tensor logits = arith.linear(x.to(dt), weights.layer(layer, "ffn.gate.weight").to(dt));  // [T, E]
  const at::Tensor scores = expert_scores(logits, config.scoring_func);
  Routing routing;
  if (config.is_hash_layer(layer)) {
    routing.experts = weights.layer(layer, "ffn.gate.tid2eid").index_select(0, token_ids);
  } else {
    const at::Tensor biased = scores + weights.layer(layer, "ffn.gate.bias");
    routing.experts = std::get<1>(biased.topk(config.num_experts_per_tok, /*dim=*/-1));
  }
  at::Tensor w = scores.gather(1, routing.experts);
  if (config.norm_topk_prob && config.scoring_func != ScoringFunc::kSoftmax) w = w / (w.sum(-1, /*keepdim=*/true) + 1e-20);
  routing.weights = (w * config.routed_scaling_factor).to(at::kFloat);
  return routing;
}

at::Tensor moe_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids,
                       ExpertCommunicator& comm, const Arithmetic& arith, ExpertWorkspace* workspace, const ForwardHooks* hooks) {
  const ModelConfig& config = weights.config();
  enter(hooks, ForwardPart::kRouter, layer);
  const Routing routing = route_tokens(weights, layer, x, token_ids, arith);
  enter(hooks, ForwardPart::kExchange, layer);
  std::vector<int64_t> counts, check;
  const at::Tensor all_x = comm.all_gather_rows(x, counts);
  const at::Tensor all_experts = comm.all_gather_rows(routing.experts, check);
  const at::Tensor all_weights = comm.all_gather_rows(routing.weights, check);
  enter(hooks, ForwardPart::kRoutedExperts, layer);
  at::Tensor out;
  if (arith.sums_slots_after_exchange()) {
    const at::Tensor slots = arith.routed_slots(weights, layer, all_x, all_experts, all_weights, workspace);  // [N, k, D] float32
    enter(hooks, ForwardPart::kExchange, layer);
    // A (token, slot) is nonzero on its expert's rank only, so the sum over ranks is exact.
    const at::Tensor mine = comm.reduce_scatter_rows(slots.flatten(1), counts).view({-1, slots.size(1), slots.size(2)});
    out = sum_slots(mine).to(arith.moe_sum_dtype(x.scalar_type()));  // [T, D]
  } else {
    const at::Tensor partial = arith.routed_experts(weights, layer, all_x, all_experts, all_weights, workspace);  // [N, D] float32
    enter(hooks, ForwardPart::kExchange, layer);
    out = comm.reduce_scatter_rows(partial, counts).to(arith.moe_sum_dtype(x.scalar_type()));  // [T, D]
  }
  enter(hooks, ForwardPart::kSharedExpert, layer);
  if (observing(hooks)) hooks->observe(layer_prefix(layer) + "ffn.routed", out);
  if (config.n_shared_experts > 0) {
    const at::Tensor shared =
        arith.swiglu_mlp(x, weights.linear(layer, "ffn.shared_experts.w1"), weights.linear(layer, "ffn.shared_experts.w2"),
                         weights.linear(layer, "ffn.shared_experts.w3"), config.swiglu_limit);
    if (observing(hooks)) hooks->observe(layer_prefix(layer) + "ffn.shared", shared);
    out = out + shared.to(out.scalar_type());
  }
  return out.to(x.scalar_type());
}

}  // namespace deepinfer::model
