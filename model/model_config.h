#pragma once
// ModelConfig: the DeepSeek-V4 hyper-parameters the forward, the weight specs and the
// cache need, parsed from a checkpoint's config.json in either spelling (official keys
// such as compress_ratios / num_hash_layers / qk_rope_head_dim / rope_scaling, or the
// transformers keys layer_types / mlp_layer_types / compress_rates / rope_parameters /
// partial_rotary_factor) and validated (errors name the file, key and value).
// Owns: parsing, defaults, validation, per-layer queries. Does not own: weights or tensors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::model {

// Tokens per paged cache block. Compress ratios must divide it.
inline constexpr int64_t kBlockTokens = 128;

enum class LayerType { kSliding, kCsa, kHca };  // ratio 0 / overlap compressor + indexer / plain compressor
enum class MlpType { kHashMoe, kMoe };          // routed by tid2eid[token] / by top-k of biased scores
enum class ScoringFunc { kSqrtSoftplus, kSigmoid, kSoftmax };

std::string_view layer_type_name(LayerType type);  // HF spelling: "sliding_attention", ...
std::string_view scoring_func_name(ScoringFunc func);

// YaRN for the compress rope (applied to every layer with ratio > 0; no mscale).
struct YarnScaling {
  double factor = 16.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 65536;
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t bos_token_id = 0;  // HF defaults for DeepSeek-V4
  int64_t eos_token_id = 1;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 1;  // V4: one shared K=V latent
  int64_t head_dim = 0;
  int64_t rope_head_dim = 0;  // rope on the LAST rope_head_dim channels
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t sliding_window = 128;

  std::vector<LayerType> layer_types;    // [num_layers]
  std::vector<int64_t> compress_ratios;  // [num_layers]; 0 for sliding layers
  std::vector<MlpType> mlp_types;        // [num_layers]

  double rope_theta = 10000.0;            // ratio-0 layers, no scaling
  double compress_rope_theta = 160000.0;  // ratio>0 layers, with yarn
  YarnScaling yarn;
  int64_t max_position_embeddings = 1048576;

  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_shared_experts = 1;
  int64_t moe_intermediate_size = 0;
  ScoringFunc scoring_func = ScoringFunc::kSqrtSoftplus;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // 0 = no clamp

  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;

  int64_t num_nextn_predict_layers = 0;  // MTP layers: parsed, not built
  bool tie_word_embeddings = false;

  // Per-layer queries.
  LayerType layer_type(int64_t layer) const { return layer_types.at(layer); }
  int64_t compress_ratio(int64_t layer) const { return compress_ratios.at(layer); }
  bool is_hash_layer(int64_t layer) const { return mlp_types.at(layer) == MlpType::kHashMoe; }
  // Compressor rows per token: 2 for CSA (overlap), 1 for HCA, 0 for sliding layers.
  int64_t compress_overlap(int64_t layer) const;
  int64_t num_hash_layers() const;  // count of hash-routed layers
  int64_t nope_head_dim() const { return head_dim - rope_head_dim; }
  int64_t hc_dim() const { return hc_mult * hidden_size; }
  int64_t hc_mix_dim() const { return (2 + hc_mult) * hc_mult; }

  // Throws std::invalid_argument naming the field and value on any inconsistency.
  void validate() const;
};

// Parses config.json text. `origin` (usually the file path) prefixes every error message.
ModelConfig parse_model_config(std::string_view json, const std::string& origin);
// Reads and parses a file (a directory means DIR/config.json).
ModelConfig load_model_config(const std::string& path);

// The fast test variant of deepseek-v4.md §1.2: the tiny config with sliding_window 16,
// HCA ratio 16, index_topk 4 (layers SWA, SWA, CSA, HCA, CSA, HCA; 3 hash layers).
ModelConfig tiny_fast_test_config();

}  // namespace deepinfer::model
