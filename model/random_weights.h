#pragma once
// Deterministic random weights for a config: the tiny test models and `init-model`.
// Each tensor is drawn from its own generator seeded by (seed, tensor name), so a value never
// depends on the expert range or the order of generation. On the CPU the generator is
// mt19937; on a CUDA device (CUDA build) each tensor is drawn there with Philox, because the
// CPU needs many minutes for the ~25G parameters of v4-flash-slice: the values then depend on
// the GPU model and the PyTorch version (Philox's launch shape follows the SM count), and are
// deterministic for them; init-model's checkpoints are always CPU draws. Values are non-degenerate as deepseek-v4.md §1.2 asks: random
// tid2eid rows (distinct experts per row), routing bias, sinks, compressor position biases,
// mHC base and scale, norm weights around 1.
// With format.fp8_linears the FP8 linears are rounded through FP8 (quantize + dequantize),
// and with format.fp4_experts the routed experts are held packed FP4, so the in-memory model
// equals the one a checkpoint written in that format loads back to.
// Owns: value generation. Does not own: writing checkpoints (checkpoint_writer).

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "model/model_config.h"
#include "model/weight_specs.h"
#include "model/weights.h"

namespace deepinfer::model {

// Compute dtype = format.dense_dtype (F32 -> kFloat, BF16 -> kBFloat16).
// keep_fp8: FP8 linears held as codes and float32 scales (weights.h), else dequantized.
ModelWeights random_weights(const ModelConfig& config, const WeightFormat& format, uint64_t seed, at::Device device,
                            std::optional<ExpertRange> experts = std::nullopt, bool keep_fp8 = false);

// The float32 value of one spec's tensor in logical shape (before any quantization), as
// random_weights draws it. Exposed for the checkpoint writer and tests.
at::Tensor random_tensor(const ModelConfig& config, const WeightSpec& spec, uint64_t seed, at::Device device = at::kCPU);

}  // namespace deepinfer::model
