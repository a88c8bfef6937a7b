#pragma once
// The grouped routed-expert path for FP4 experts on CUDA: no host synchronization and a handful
// of launches per layer, instead of a loop over experts. Pairs (token, slot) are sorted by
// expert; one kernel dequantizes every expert that got a pair into reusable bfloat16 buffers;
// two grouped GEMMs (at::_grouped_mm through torch_compat.h) run w1|w3 and w2 over all
// experts at once. moe.cpp's per-expert loop is the reference and the fallback.
// Owns: the per-layer device tables of expert pointers and the dequantization buffers.
// Does not own: routing (moe.cpp) or the exchange between ranks.

#include <ATen/ATen.h>

#include <cstdint>
#include <map>

#include "model/weights.h"

namespace deepinfer::model {

class ExpertWorkspace {
 public:
  // Whether the grouped path can run for this layer and input: CUDA build with LibTorch >= 2.8,
  // x bfloat16 on CUDA, packed FP4 experts with dimensions multiple of 32, and
  // DEEPINFER_MOE_LOOP unset (set it to compare with the loop).
  bool usable(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const;

  // x [N, D] bfloat16, experts [N, k] int64, routing_weights [N, k] float32 -> float32 [N, D]:
  // sum over the pairs whose expert this rank owns.
  at::Tensor routed_partial(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                            const at::Tensor& routing_weights);

 private:
  struct LayerTables {
    at::Tensor w13_packed, w13_scale;  // int64 [2E] device pointers: w1 of each expert, then w3
    at::Tensor w2_packed, w2_scale;    // int64 [E]
  };
  const LayerTables& tables(const ModelWeights& weights, int64_t layer);

  std::map<int64_t, LayerTables> tables_;
  at::Tensor w13_;  // bfloat16 [E, 2I, D]: rows 0..I-1 from w1, I..2I-1 from w3
  at::Tensor w2_;   // bfloat16 [E, D, I]
};

}  // namespace deepinfer::model
