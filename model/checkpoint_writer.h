#pragma once
// Writes DeepSeek-V4 checkpoints: config.json in the official key spelling plus safetensors
// under the official tensor names, in a storage format (WeightFormat: dense dtype, FP8
// linears, FP4 routed experts). Backs `deepinfer init-model`.
// Owns: config.json text, the storage conversion (quantizing FP8 linears / FP4 experts when
// the format asks for them), sharding (model.safetensors, or model-0000i-of-0000n.safetensors
// + model.safetensors.index.json past the shard size). Output bytes depend only on the inputs.
// Does not own: drawing values (random_weights.h), the tensor list (weight_specs.h), or the
// safetensors byte layout (io/safetensors.h).

#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "model/weight_specs.h"
#include "model/weights.h"

namespace deepinfer::model {

inline constexpr uint64_t kDefaultShardBytes = uint64_t{4} << 30;  // 4 GiB

// config.json text: official keys (compress_ratios, num_hash_layers, qk_rope_head_dim,
// rope_scaling, ...), one top-level key per line, fixed key order, shortest round-trip numbers.
// Falls back to the HF keys layer_types / compress_rates (mlp_layer_types) only for configs
// the official keys cannot express (a CSA ratio other than 4; hash layers not a prefix).
// Adds quantization_config (fp8_linears) and expert_dtype "fp4" (fp4_experts) like V4-Flash.
std::string config_json(const ModelConfig& config, const WeightFormat& format);

struct WriteOptions {
  uint64_t max_shard_bytes = kDefaultShardBytes;  // a single tensor larger than this gets its own shard
};

// Throws std::invalid_argument naming the file where dir (if it exists) already holds a
// checkpoint: a .safetensors file or model.safetensors.index.json. Writers refuse such a dir.
void check_no_checkpoint(const std::string& dir);

// Writes config.json + safetensors for weights (which must hold every routed expert) into dir
// (created if missing). Tensors are converted to the format: dense ones to format.dense_dtype,
// FP8 linears quantized (from their in-memory dense values), routed experts quantized to FP4
// or dequantized from FP4 as the format asks. Throws naming the tensor on a missing weight.
void write_checkpoint(const ModelConfig& config, const ModelWeights& weights, const WeightFormat& format, const std::string& dir,
                      const WriteOptions& options = {});

struct InitModelOptions {
  std::string config_path;  // a config.json file (or a folder holding one)
  std::string output_dir;
  uint64_t seed = 0;
  bool experts_fp4 = false;
  bool fp8_linears = false;
  io::DType dense_dtype = io::DType::kBF16;  // the official checkpoints' dense dtype
  WriteOptions write{};
};

// `deepinfer init-model`: a random checkpoint for a config, drawn tensor by tensor with
// random_tensor() (never holding the whole model), deterministic for the seed. Loading it
// with the compute dtype of dense_dtype gives exactly random_weights(config, format, seed).
void init_model(const InitModelOptions& options);

}  // namespace deepinfer::model
