#include "model/step_cost.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace deepinfer::model {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

double StepCost::floor_ms(double bytes_per_s, double flops_per_s) const {
  return 1e3 * std::max(bytes() / bytes_per_s, flops / flops_per_s);
}

DecodeCost::DecodeCost(const ModelWeights& weights, int world_size)
    : config_(weights.config()), world_size_(world_size), state_elem_bytes_(static_cast<double>(at::elementSize(weights.dtype()))) {
  TORCH_CHECK(world_size >= 1, "DecodeCost: world size ", world_size);
  const ExpertRange& held = weights.experts();
  experts_held_ = static_cast<double>(held.size());
  const std::string first_expert = expert_prefix(0, held.first);
  for (const std::string& name : weights.names()) {
    const at::Tensor& t = weights.get(name);
    const double bytes = static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
    if (name.find(".ffn.experts.") != std::string::npos) {
      if (starts_with(name, first_expert.c_str())) expert_bytes_ += bytes;  // one expert of one layer
      continue;
    }
    if (name == "embed.weight" || name.find("gate.tid2eid") != std::string::npos) {
      row_bytes_ += bytes / static_cast<double>(t.size(0));
      continue;
    }
    dense_bytes_ += bytes;
    // A linear (kept FP8 ones too: uint8 codes): 2 FLOPs per weight per token; the head only for
    // the sampled row.
    const bool linear = t.dim() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    if (name == "head.weight")
      head_flops_per_token_ = 2.0 * static_cast<double>(t.numel());
    else if (linear || (t.dim() == 2 && (starts_with(name, "hc_") || name.find(".hc_") != std::string::npos)))  // the mHC projections
      dense_flops_per_token_ += 2.0 * static_cast<double>(t.numel());
  }
}

StepCost DecodeCost::step(int64_t batch, double context) const {
  const ModelConfig& c = config_;
  const double B = static_cast<double>(batch), N = static_cast<double>(c.n_routed_experts), k = static_cast<double>(c.num_experts_per_tok);
  const double tokens = B * world_size_;  // every rank's tokens reach every rank's experts
  const double picked = experts_held_ * (1.0 - std::pow(1.0 - k / N, tokens));
  StepCost cost;
  cost.weight_bytes = dense_bytes_ + B * row_bytes_ + static_cast<double>(c.num_layers) * picked * expert_bytes_;
  const double D = static_cast<double>(c.hidden_size), I = static_cast<double>(c.moe_intermediate_size);
  // Each rank computes its held experts for the pairs that pick them: on average k / ranks per token.
  const double expert_flops = tokens * (k / world_size_) * 3.0 * 2.0 * D * I * static_cast<double>(c.num_layers);
  cost.flops = B * (dense_flops_per_token_ + head_flops_per_token_) + expert_flops;
  const double H = static_cast<double>(c.num_heads), d = static_cast<double>(c.head_dim), W = static_cast<double>(c.sliding_window);
  const double e = state_elem_bytes_;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const double m = static_cast<double>(c.compress_ratio(l));
    double keys = std::min(context, W);
    double state = keys * d * e;  // window ring
    if (m > 0) {
      const double entries = std::floor(context / m), overlap = static_cast<double>(c.compress_overlap(l));
      state += 2.0 * overlap * m * overlap * d * 4.0;  // kv and score tails, float32
      if (c.layer_type(l) == LayerType::kCsa) {
        const double Id = static_cast<double>(c.index_head_dim), Ih = static_cast<double>(c.index_n_heads);
        const double picks = std::min(entries, static_cast<double>(c.index_topk));
        state += entries * Id * e + picks * d * e + 2.0 * 2.0 * m * 2.0 * Id * 4.0;  // indexer keys, picked entries, indexer tails
        cost.flops += B * 2.0 * Ih * Id * entries;
        keys += picks;
      } else {
        state += entries * d * e;
        keys += entries;
      }
    }
    cost.state_bytes += B * state;
    cost.flops += B * 2.0 * 2.0 * H * d * keys;  // q . k and p . v
  }
  return cost;
}

int64_t step_workspace_bytes(const ModelConfig& c, at::ScalarType dtype, const StepShape& step) {
  constexpr int64_t kQueryTile = 256;  // AttentionOptions::query_tile
  const int64_t e = static_cast<int64_t>(c10::elementSize(dtype)), T = step.tokens, D = c.hidden_size;
  const int64_t residual = 4 * T * c.hc_mult * D * 4;
  int64_t hca_entries = 0, csa_entries = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t m = c.compress_ratio(l);
    if (m == 0) continue;
    int64_t& entries = c.layer_type(l) == LayerType::kCsa ? csa_entries : hca_entries;
    entries = std::max<int64_t>(entries, step.max_context / m);
  }
  // Query rows of one tile: a prefill group tiles its run, a decode group attends all its
  // sequences at once.
  const int64_t rows = std::max(std::min(T, kQueryTile), std::min(step.max_seqs, T));
  const int64_t picks = std::min<int64_t>(c.index_topk, csa_entries);
  int64_t transient = 0;
  if (step.in_place) {
    // The kernels read the state in place: the indexer's float32 scores of one tile and its
    // top-k, and every query's picks.
    transient = std::max(T * picks * 8, rows * csa_entries * 4 + rows * picks * 12);
  } else {
    const int64_t keys = c.sliding_window + std::max(picks, hca_entries);
    transient = std::max(rows * c.num_heads * keys * 4 * 2, rows * c.index_n_heads * csa_entries * (e + 8));
  }
  const int64_t attention = 3 * T * c.num_heads * c.head_dim * e + transient;
  const int64_t pairs = T * c.num_experts_per_tok;
  // The FP4 kernels round each prefill tile's rows up to 32 (model/cuda/moe_fp4_gemm.h): at most 31
  // rows more of x and activations per expert with over 8 rows.
  const int64_t padding = 31 * std::min<int64_t>(c.n_routed_experts, pairs / 9) * (D + c.moe_intermediate_size) * e;
  const int64_t moe = pairs * (D * (e + 8) + 3 * c.moe_intermediate_size * e) + padding;
  const int64_t logits = 3 * step.sampled_rows * c.vocab_size * 4 + kScoreSliceRows * c.vocab_size * 32;
  // What else is alive across the sub-blocks, and the caching allocator's rounding: the peaks
  // measured on H200 (v4-flash-slice at 4K-128K with gathered attention, docs/benchmarks.md)
  // were up to 16% above the sum.
  constexpr int64_t kMarginPercent = 25;
  return (residual + std::max(attention, moe) + logits) * (100 + kMarginPercent) / 100;
}

}  // namespace deepinfer::model
