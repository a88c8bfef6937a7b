#include "model/model_config.h"

#include <stdexcept>
#include <string>

namespace deepinfer::model {
namespace {

constexpr std::string_view kSlidingName = "sliding_attention";
constexpr std::string_view kCsaName = "compressed_sparse_attention";
constexpr std::string_view kHcaName = "heavily_compressed_attention";

void check(bool ok, std::string_view key, const std::string& problem) {
  if (!ok) throw std::invalid_argument("config key '" + std::string(key) + "': " + problem);
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

std::string_view layer_type_name(LayerType type) {
  switch (type) {
    case LayerType::kSliding: return kSlidingName;
    case LayerType::kCsa: return kCsaName;
    case LayerType::kHca: return kHcaName;
  }
  return "?";
}

std::string_view scoring_func_name(ScoringFunc func) {
  switch (func) {
    case ScoringFunc::kSqrtSoftplus: return "sqrtsoftplus";
    case ScoringFunc::kSigmoid: return "sigmoid";
    case ScoringFunc::kSoftmax: return "softmax";
  }
  return "?";
}

int64_t ModelConfig::compress_overlap(int64_t layer) const {
  switch (layer_type(layer)) {
    case LayerType::kSliding: return 0;
    case LayerType::kCsa: return 2;
    case LayerType::kHca: return 1;
  }
  return 0;
}

int64_t ModelConfig::num_hash_layers() const {
  int64_t n = 0;
  for (MlpType type : mlp_types) n += type == MlpType::kHashMoe;
  return n;
}

void ModelConfig::validate() const {
  check(vocab_size > 0, "vocab_size", "must be positive, got " + str(vocab_size));
  check(hidden_size > 0, "hidden_size", "must be positive, got " + str(hidden_size));
  check(num_layers > 0, "num_hidden_layers", "must be positive, got " + str(num_layers));
  check(num_heads > 0, "num_attention_heads", "must be positive, got " + str(num_heads));
  check(num_kv_heads == 1, "num_key_value_heads", "V4 has one shared K=V latent; expected 1, got " + str(num_kv_heads));
  check(eos_token_id >= 0 && eos_token_id < vocab_size, "eos_token_id",
        "must be a token id below vocab_size " + str(vocab_size) + ", got " + str(eos_token_id));
  check(bos_token_id >= 0 && bos_token_id < vocab_size, "bos_token_id",
        "must be a token id below vocab_size " + str(vocab_size) + ", got " + str(bos_token_id));
  check(head_dim > 0, "head_dim", "must be positive, got " + str(head_dim));
  check(rope_head_dim > 0 && rope_head_dim % 2 == 0 && rope_head_dim <= head_dim, "qk_rope_head_dim",
        "must be even and in (0, head_dim=" + str(head_dim) + "], got " + str(rope_head_dim));
  check(q_lora_rank > 0, "q_lora_rank", "must be positive, got " + str(q_lora_rank));
  check(o_groups > 0 && (num_heads * head_dim) % o_groups == 0 && num_heads % o_groups == 0, "o_groups",
        "must divide num_attention_heads=" + str(num_heads) + ", got " + str(o_groups));
  check(o_lora_rank > 0, "o_lora_rank", "must be positive, got " + str(o_lora_rank));
  check(sliding_window > 0, "sliding_window", "must be positive, got " + str(sliding_window));
  check(static_cast<int64_t>(layer_types.size()) == num_layers && static_cast<int64_t>(compress_ratios.size()) == num_layers,
        "compress_ratios", "need one entry per layer (" + str(num_layers) + "), got " + str(static_cast<int64_t>(compress_ratios.size())));
  check(static_cast<int64_t>(mlp_types.size()) == num_layers, "mlp_layer_types",
        "need one entry per layer (" + str(num_layers) + "), got " + str(static_cast<int64_t>(mlp_types.size())));
  bool any_csa = false;
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t ratio = compress_ratios[l];
    const std::string where = "layer " + str(l) + " (" + std::string(layer_type_name(layer_types[l])) + ")";
    if (layer_types[l] == LayerType::kSliding) {
      check(ratio == 0, "compress_ratios", where + " must have ratio 0, got " + str(ratio));
    } else {
      check(ratio > 0 && kBlockTokens % ratio == 0, "compress_ratios",
            where + ": ratio must be positive and divide the " + str(kBlockTokens) + "-token cache block, got " + str(ratio));
    }
    any_csa = any_csa || layer_types[l] == LayerType::kCsa;
  }
  if (any_csa) {
    check(index_n_heads > 0, "index_n_heads", "must be positive with CSA layers, got " + str(index_n_heads));
    check(index_head_dim > rope_head_dim && index_head_dim % 2 == 0, "index_head_dim",
          "must be even and larger than qk_rope_head_dim=" + str(rope_head_dim) + ", got " + str(index_head_dim));
    check(index_topk > 0, "index_topk", "must be positive with CSA layers, got " + str(index_topk));
  }
  check(n_routed_experts > 0, "n_routed_experts", "must be positive, got " + str(n_routed_experts));
  check(num_experts_per_tok > 0 && num_experts_per_tok <= n_routed_experts, "num_experts_per_tok",
        "must be in [1, n_routed_experts=" + str(n_routed_experts) + "], got " + str(num_experts_per_tok));
  check(n_shared_experts >= 0, "n_shared_experts", "must be non-negative, got " + str(n_shared_experts));
  check(moe_intermediate_size > 0, "moe_intermediate_size", "must be positive, got " + str(moe_intermediate_size));
  check(routed_scaling_factor > 0, "routed_scaling_factor", "must be positive, got " + std::to_string(routed_scaling_factor));
  check(swiglu_limit >= 0, "swiglu_limit", "must be non-negative, got " + std::to_string(swiglu_limit));
  check(hc_mult >= 1, "hc_mult", "must be at least 1, got " + str(hc_mult));
  check(hc_sinkhorn_iters >= 1, "hc_sinkhorn_iters", "must be at least 1, got " + str(hc_sinkhorn_iters));
  check(hc_eps > 0, "hc_eps", "must be positive, got " + std::to_string(hc_eps));
  check(rms_norm_eps > 0, "rms_norm_eps", "must be positive, got " + std::to_string(rms_norm_eps));
  check(rope_theta > 0, "rope_theta", "must be positive, got " + std::to_string(rope_theta));
  check(compress_rope_theta > 0, "compress_rope_theta", "must be positive, got " + std::to_string(compress_rope_theta));
  check(yarn.factor >= 1 && yarn.beta_fast > 0 && yarn.beta_slow > 0 && yarn.original_max_position_embeddings > 0, "rope_scaling",
        "needs factor >= 1 and positive beta_fast, beta_slow, original_max_position_embeddings");
  check(num_nextn_predict_layers >= 0, "num_nextn_predict_layers", "must be non-negative, got " + str(num_nextn_predict_layers));
}

ModelConfig tiny_fast_test_config() {
  ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.num_layers = 6;
  c.num_heads = 8;
  c.head_dim = 64;
  c.rope_head_dim = 16;
  c.q_lora_rank = 128;
  c.o_groups = 4;
  c.o_lora_rank = 64;
  c.sliding_window = 16;
  c.layer_types = {LayerType::kSliding, LayerType::kSliding, LayerType::kCsa, LayerType::kHca, LayerType::kCsa, LayerType::kHca};
  c.compress_ratios = {0, 0, 4, 16, 4, 16};
  c.mlp_types = {MlpType::kHashMoe, MlpType::kHashMoe, MlpType::kHashMoe, MlpType::kMoe, MlpType::kMoe, MlpType::kMoe};
  c.index_n_heads = 16;
  c.index_head_dim = 32;
  c.index_topk = 4;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.n_shared_experts = 1;
  c.moe_intermediate_size = 128;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 10.0;
  c.validate();
  return c;
}

}  // namespace deepinfer::model
