#pragma once
// The single source of truth of a DeepSeek-V4 checkpoint's tensors: official names, storage
// shapes and storage dtypes for a config and a storage format (deepseek-v4.md §3).
// Owns: the name/shape/dtype table and the classification of each tensor (what it is for,
// whether it is quantized and how). Does not own: reading, dequantizing or holding tensors.
// MTP (mtp.*) tensors are not listed: the forward does not build MTP.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "model/model_config.h"

namespace deepinfer::model {

// How a checkpoint stores its tensors.
struct WeightFormat {
  io::DType dense_dtype = io::DType::kF32;  // F32 or BF16: embed, head, norms, dense linears
  bool fp8_linears = false;  // 128x128 e8m0 block scales (quant.h kFp8Block); attn wq_a/wq_b/wkv/wo_a/wo_b, indexer.wq_b, shared experts:
                             // F8_E4M3 + ".scale"
  bool fp4_experts = false;  // routed experts w1/w2/w3: packed FP4 (I8, [out, in/2]) + ".scale" [out, in/32]
                             // (one e8m0 per 32 inputs, quant.h kFp4Block)
};

// The format of the real V4-Flash checkpoint: BF16, FP8 linears, FP4 experts.
WeightFormat v4_flash_format();
// The storage format a config.json announces, as V4-Flash's does: "expert_dtype": "fp4" (packed
// FP4 routed experts) and a "quantization_config" with "quant_method": "fp8" (FP8 linears);
// dense tensors in `dense_dtype`. For random weights (`random:CONFIG`, benchmarks).
WeightFormat announced_format(std::string_view config_json, io::DType dense_dtype);

enum class WeightKind {
  kDense,      // stored in dense_dtype, held in the compute dtype
  kFloat32,    // always F32 (hc_*, attn_sink, ape, gate.bias)
  kInt64,      // tid2eid
  kFp8Weight,  // F8_E4M3 [out, in]; its scale is the next spec
  kFp8Scale,   // F8_E8M0 [ceil(out/128), ceil(in/128)]
  kFp4Weight,  // I8 packed [out, in/2], low nibble = even column
  kFp4Scale,   // F8_E8M0 [out, in/32]
};

struct WeightSpec {
  std::string name;            // official name, e.g. "layers.2.attn.wq_a.weight"
  std::vector<int64_t> shape;  // storage shape
  io::DType dtype;             // storage dtype
  WeightKind kind = WeightKind::kDense;
  std::vector<int64_t> logical_shape;  // dequantized shape (== shape unless quantized)
  int64_t expert = -1;                 // routed expert id, or -1
};

// Every tensor of the checkpoint in a fixed order. An expert range [first, last) limits the
// routed experts to those (for expert parallelism); nullopt lists all.
struct ExpertRange {
  int64_t first = 0;
  int64_t last = 0;
  bool contains(int64_t expert) const { return expert >= first && expert < last; }
  int64_t size() const { return last - first; }
};
std::vector<WeightSpec> weight_specs(const ModelConfig& config, const WeightFormat& format,
                                     std::optional<ExpertRange> experts = std::nullopt);

// Name helpers shared by the forward and the loader.
std::string layer_prefix(int64_t layer);                   // "layers.L."
std::string expert_prefix(int64_t layer, int64_t expert);  // "layers.L.ffn.experts.E."
// "X.weight" -> "X.scale" (the official spelling of quantization scales).
std::string scale_name(const std::string& weight_name);

}  // namespace deepinfer::model
