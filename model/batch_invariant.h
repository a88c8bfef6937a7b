#pragma once
// BatchInvariantArithmetic: the official arithmetic (arithmetic.h) with every operation that
// batches rows computed so that a row's bits never depend on the rows beside it (the job setting
// `batch_invariant`, issue 20). On CUDA:
//   - linear(), group_linear(): the batch-invariant GEMMs (model/cuda/dense_gemm.h: one
//     per-element instruction order whatever the row count; cuBLAS picks its kernel, split-K and
//     tile order from the row count, so at::linear's bits follow the batch). A shape the kernels
//     do not take throws rather than fall back.
//   - rms_norm(), hc_projection(): the float32 sum of squares of a row as its product with a
//     vector of ones through the same float32 GEMM (a fixed chunked order over the row), where
//     ATen's mean picks how many threads share a row from the number of rows.
//   - the routed experts: each (token, slot)'s weighted output kept apart (routed_slots()), summed
//     over the ranks (one owner, zeros elsewhere: exact) and then over the token's k slots in slot
//     order on its own rank (moe.h moe_forward), so the sum's order does not depend on the world
//     size or on which rank owns which expert (issue 20 item 2). The FP4 kernels where they run
//     (per_slot; their rows never depend on the other rows, issue 18); dense experts (the tiny test
//     models) as every owned expert over every row through linear(), weighted by the routing
//     weight (0 where not picked): no host read, E times the FLOPs (at::_grouped_mm picks its tiles
//     from the total row count). The exchange carries k times the bytes.
// Everything else is the official arithmetic's, whose CUDA kernels are per row already
// (attention, indexer, compressor, mHC, norm + RoPE, sampler). It keeps those fused kernels
// although it overrides rms_norm(): its rms_norm rounds as the official one does (one rounding of
// the float32 result), only the order of the sum of squares differs, as the kernels' own does.
// On the CPU every method is the official one but the routed experts' order of summation (the
// slots after the exchange, through the per-expert loop); the CPU's GEMMs are not claimed
// invariant.
// Owns: nothing (stateless). Does not own: the kernels or the layer wiring.

#include "model/arithmetic.h"

namespace deepinfer::model {

class BatchInvariantArithmetic final : public Arithmetic {
 public:
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w) const override;
  at::Tensor group_linear(const at::Tensor& x, const at::Tensor& w) const override;
  // Throws on CUDA: the job dequantizes FP8 linears at load in this mode (cuBLASLt's FP8 GEMM
  // picks its algorithm from the row count).
  at::Tensor linear_fp8(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale) const override;
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const override;
  at::Tensor hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const override;
  bool sums_slots_after_exchange() const override;
  at::Tensor routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                          const at::Tensor& routing_weights, ExpertWorkspace* workspace) const override;
};

}  // namespace deepinfer::model
