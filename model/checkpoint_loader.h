#pragma once
// Loads a DeepSeek-V4 checkpoint folder (config.json + safetensors, one file or shards with
// model.safetensors.index.json) into ModelWeights on a device and compute dtype.
// Owns: name resolution in both spellings (official "layers.2.attn.wq_a.weight", and what
// transformers' save_pretrained writes: "model." prefix, model.embed_tokens.weight,
// model.hc_head.hc_fn|hc_base|hc_scale, model.norm.weight, attn.norm.weight for kv_norm),
// storage-format detection by dtype, the presence / dtype / shape check of every WeightSpec
// (errors name the tensor and its file), FP8 dequantization, keeping FP4 routed experts packed.
// Does not own: the tensor list (weight_specs.h), the in-memory layout (weights.h), decoding
// quantized bytes (quant.h), or parsing safetensors headers (io/safetensors.h).

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "model/model_config.h"
#include "model/weight_specs.h"
#include "model/weights.h"

namespace deepinfer::model {

enum class NameSpelling { kOfficial, kSavePretrained };

struct LoadOptions {
  at::ScalarType dtype = at::kFloat;  // compute dtype: kFloat or kBFloat16
  at::Device device = at::kCPU;
  std::optional<ExpertRange> experts{};  // routed experts this rank holds; nullopt = all
  bool dequantize_fp4_experts = false;   // false keeps them packed for on-demand dequant
  bool keep_fp8 = false;                 // FP8 linears as codes + float32 scales (weights.h), not dequantized
};

struct LoadReport {
  WeightFormat format;  // storage format found in the checkpoint
  NameSpelling spelling = NameSpelling::kOfficial;
  int64_t loaded = 0;                         // checkpoint tensors read
  int64_t skipped_experts = 0;                // routed-expert tensors outside the expert range
  int64_t ignored = 0;                        // tensors no spec names (mtp.*, ...), not read
  std::vector<std::string> ignored_examples;  // the first few ignored names, sorted
};

// Reads DIR/config.json (load_model_config) and the tensors of DIR.
ModelWeights load_checkpoint(const std::string& dir, const LoadOptions& options, LoadReport* report = nullptr);
ModelWeights load_checkpoint(const io::Checkpoint& checkpoint, const ModelConfig& config, const LoadOptions& options,
                             LoadReport* report = nullptr);

// Which spelling a checkpoint uses (by its embedding's name); throws when neither matches.
NameSpelling detect_spelling(const io::Checkpoint& checkpoint);
// The names an official tensor may have in a spelling, preferred first.
std::vector<std::string> spelled_names(const std::string& official, NameSpelling spelling);
// Storage format by dtype: embed.weight's dtype, whether layer 0's wq_a is F8_E4M3, whether
// the first held expert's w1 is packed (I8/U8).
WeightFormat detect_format(const io::Checkpoint& checkpoint, const ModelConfig& config, NameSpelling spelling, const ExpertRange& experts);

}  // namespace deepinfer::model
