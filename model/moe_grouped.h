#pragma once
// The grouped routed-expert path on CUDA: no host synchronization and a handful of launches per
// layer, instead of a loop over experts. Packed FP4 experts: the kernels of
// model/cuda/moe_fp4_gemm.h read each expert's FP4 weights and scales once, dequantize them in
// registers and multiply on tensor cores, gate and up in one pass with SwiGLU after it, the
// routing weight applied after down; no dequantized copy of any expert exists. Dense bfloat16
// experts (and FP4 shapes those kernels do not take): pairs (token, slot) sorted by expert, two
// grouped GEMMs (at::_grouped_mm through torch_compat.h) over all experts at once; dense experts
// stacked once per layer into [E, 2I, D] / [E, D, I] copies (only while all layers' copies
// together are at most kMaxStackedBytes, so a large dense model does not double its expert
// memory; beyond that the loop runs). Each token's k contributions are summed in slot order, so
// results repeat bit for bit. moe.cpp's per-expert loop is the reference and the fallback; the
// dequantize-then-grouped-GEMM path (routed_partial_dequantized) is the FP4 kernels' reference.
// Owns: the per-layer device tables of expert pointers and the stacked dense copies.
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

  // Whether the grouped path can run for this layer and input: CUDA kernels built (model/cuda/kernels.h),
  // x bfloat16 on CUDA, dimensions multiple of 32, and packed FP4 experts (the FP4 kernels'
  // shapes, or LibTorch >= 2.8 for the dequantizing path) or dense bfloat16 ones within
  // kMaxStackedBytes (LibTorch >= 2.8). (Without a workspace, moe_forward runs the loop.)
  bool usable(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const;
  // Whether routed_partial() runs the FP4 kernels (usable(), packed FP4 experts whose shapes
  // model/cuda/moe_fp4_gemm.h takes): their rows never depend on the other rows' count or order.
  bool runs_fp4_kernels(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const;
  // The FP4 kernels' per-pair outputs: [N, k, D] float32, each (token, slot)'s weighted expert
  // output, 0 where this rank does not own the expert (Arithmetic::routed_slots). Throws where
  // runs_fp4_kernels() is false.
  at::Tensor routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                          const at::Tensor& routing_weights);

  // x [N, D] bfloat16, experts [N, k] int64, routing_weights [N, k] float32 -> float32 [N, D]:
  // sum over the pairs whose expert this rank owns; the official arithmetic's path
  // (Arithmetic::routed_experts). Throws where usable() is false.
  at::Tensor routed_partial(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                            const at::Tensor& routing_weights);

  // The same through at::_grouped_mm, packed FP4 experts first dequantized into bfloat16
  // buffers [E, 2I, D] + [E, D, I] allocated for the call: the FP4 kernels' reference (tests,
  // moe_bench). Needs LibTorch >= 2.8.
  at::Tensor routed_partial_dequantized(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                        const at::Tensor& routing_weights);

  // The most device memory the workspace holds for a model with `experts_held` routed experts
  // per layer, packed FP4 (`fp4`) or dense in `dtype`, run on `device`: every layer's stacked
  // dense copies; for FP4 experts 0 where the FP4 kernels run (their buffers grow with the step's
  // tokens: activations, model/step_cost.h), else the dequantization buffers [E, 2I, D] +
  // [E, D, I]; 0 where the grouped path does not run (the CPU, float32). For the memory plan,
  // before any weight is loaded.
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
  at::Tensor fp4(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                 const at::Tensor& routing_weights, bool per_slot);
  const Stacked& stacked(const ModelWeights& weights, int64_t layer);
  at::Tensor grouped(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                     const at::Tensor& routing_weights);

  std::map<int64_t, LayerTables> tables_;
  std::map<int64_t, Stacked> stacked_;
};

}  // namespace deepinfer::model
