#pragma once
// Where the model comes from: a checkpoint folder, or `random:CONFIG` (deterministic random
// weights built in memory on the device, so large shapes need no checkpoint file).
// Owns: choosing the loader and the model's fingerprint for the job. Does not own: loading.

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

#include "io/tokenizer.h"
#include "model/model_config.h"
#include "model/weight_specs.h"
#include "model/weights.h"

namespace deepinfer::pipeline {

struct ModelSource {
  std::unique_ptr<model::ModelWeights> weights;
  std::string fingerprint_json;                    // {"source": ..., "config_sha256": ..., "checkpoint": ...} or the random spec
  std::shared_ptr<const io::Tokenizer> tokenizer;  // the folder's tokenizer.json; null if none (and for random:)
};

// spec: a folder with config.json + safetensors (+ an optional tokenizer.json, which the
// checkpoint fingerprint covers like every *.json), or "random:PATH/TO/config.json". With
// world_size > 1 only the routed experts of expert_range_for_rank(rank) are built or read.
// random: follows the storage format the config announces ("expert_dtype": "fp4" -> packed FP4
// routed experts; "quantization_config" fp8 -> FP8-rounded linears), as a checkpoint would,
// and draws on the device (random_weights.h).
// What load_model_source(spec, ...) would hold on `rank`, known without loading a tensor (the
// config, the storage format announced by a random: config or found in the checkpoint's
// headers, the routed experts held): for the memory plan.
struct ModelLayout {
  model::ModelConfig config;
  model::WeightFormat format;
  model::ExpertRange experts;  // held by `rank`
  bool keep_fp8 = false;       // FP8 linears (format.fp8_linears) held as FP8, not dequantized
};
ModelLayout model_layout(const std::string& spec, at::ScalarType dtype, int rank = 0, int world_size = 1, bool keep_fp8 = false);

// keep_fp8: the storage format's FP8 linears held as codes and float32 scales (model/weights.h),
// as the job setting keep_fp8_linears asks; else dequantized to `dtype`.
ModelSource load_model_source(const std::string& spec, at::ScalarType dtype, at::Device device, uint64_t random_seed, int rank = 0,
                              int world_size = 1, bool keep_fp8 = false);

}  // namespace deepinfer::pipeline
