#pragma once
// The grouped routed-expert path on CUDA: no host synchronization and a handful of launches per
// layer, instead of a loop over experts. Pairs (token, slot) are sorted by expert; two grouped
// GEMMs (at::_grouped_mm through torch_compat.h) run w1|w3 and w2 over all experts at once.
// Packed FP4 experts: one kernel dequantizes every expert that got a pair into reusable
// bfloat16 buffers. Dense bfloat16 experts: stacked once per layer into [E, 2I, D] / [E, D, I]
// copies (only while all layers' copies together are at most kMaxStackedBytes, so a large
// dense model does not double its expert memory; beyond that the loop runs). Each token's k
// contributions are summed in slot order, so results repeat bit for bit. moe.cpp's per-expert
// loop is the reference and the fallback.
// Owns: the per-layer device tables of expert pointers, the stacked dense copies and the
// dequantization buffers.
// Does not own: routing (moe.cpp) or the exchange between ranks.

#include <ATen/ATen.h>

#include <cstdint>
#include <map>

#include "model/ops.h"
#include "model/weights.h"

namespace deepinfer::model {

class ExpertWorkspace {
 public:
  static constexpr int64_t kMaxStackedBytes = int64_t{2} << 30;

  // Whether the grouped path can run for this layer and input: CUDA kernels built (model/cuda/kernels.h), LibTorch >= 2.8,
  // x bfloat16 on CUDA, dimensions multiple of 32, packed FP4 experts or dense bfloat16 ones
  // within kMaxStackedBytes. (Without a workspace, moe_forward runs the loop.)
  bool usable(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const;

  // x [N, D] bfloat16, experts [N, k] int64, routing_weights [N, k] float32 -> float32 [N, D]:
  // sum over the pairs whose expert this rank owns; the official arithmetic's path
  // (Arithmetic::routed_experts). Throws where usable() is false.
  at::Tensor routed_partial(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                            const at::Tensor& routing_weights);

  // The most device memory the workspace holds for a model with `experts_held` routed experts
  // per layer, packed FP4 (`fp4`) or dense in `dtype`, run on `device`: the bfloat16 dequant
  // buffers [E, 2I, D] + [E, D, I], or every layer's stacked dense copies; 0 where the grouped
  // path does not run (the CPU, float32). For the memory plan, before any weight is loaded.
  static int64_t scratch_bytes(const ModelConfig& config, bool fp4, int64_t experts_held, at::ScalarType dtype, at::Device device);

 private:
  struct LayerTables {
    at::Tensor w13_packed, w13_scale;  // int64 [2E] device pointers: expert e's w1 at 2e, its w3 at 2e + 1
    at::Tensor w2_packed, w2_scale;    // int64 [E]
  };
  struct Stacked {
    at::Tensor w13;  // bfloat16 [E, 2I, D]
    at::Tensor w2;   // bfloat16 [E, D, I]
  };
  const LayerTables& tables(const ModelWeights& weights, int64_t layer);
  const Stacked& stacked(const ModelWeights& weights, int64_t layer);

  std::map<int64_t, LayerTables> tables_;
  std::map<int64_t, Stacked> stacked_;
  at::Tensor w13_;  // bfloat16 [E, 2I, D]: rows 0..I-1 from w1, I..2I-1 from w3
  at::Tensor w2_;   // bfloat16 [E, D, I]
};

}  // namespace deepinfer::model
