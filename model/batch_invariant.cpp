#include "model/batch_invariant.h"

#include <vector>

#include "model/cuda/kernels.h"
#include "model/moe.h"
#include "model/moe_grouped.h"
#include "model/ops.h"

namespace deepinfer::model {
namespace {

// x [..., K] float32 on CUDA -> [..., 1] float32: sum_k x_k^2 in the float32 GEMM's fixed order.
at::Tensor sum_of_squares(const at::Tensor& x) {
  const at::Tensor ones = at::ones({1, x.size(-1)}, x.options());
  return cuda::invariant_linear(x * x, ones, at::kFloat);
}

// Every owned dense expert over every row: slot (t, s) += expert_e(x_t) * (its routing weight if
// it picked e, else 0) for ascending e. A slot picks one expert, so it gets one nonzero term.
at::Tensor every_expert_slots(const Arithmetic& arith, const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                              const at::Tensor& experts, const at::Tensor& routing_weights) {
  const ModelConfig& config = weights.config();
  at::Tensor out = at::zeros({x.size(0), experts.size(1), x.size(1)}, x.options().dtype(at::kFloat));  // [N, k, D]
  const ExpertRange& owned = weights.experts();
  for (int64_t e = owned.first; e < owned.last; ++e) {
    const at::Tensor y = arith.swiglu_mlp(x, weights.expert_matrix(layer, e, "w1"), weights.expert_matrix(layer, e, "w2"),
                                          weights.expert_matrix(layer, e, "w3"), config.swiglu_limit);
    const at::Tensor w = routing_weights.to(at::kFloat) * experts.eq(e).to(at::kFloat);  // [N, k]
    out = out + y.to(at::kFloat).unsqueeze(1) * w.unsqueeze(2);
  }
  return out;
}

}  // namespace

const Arithmetic& Arithmetic::batch_invariant() {
  static const BatchInvariantArithmetic instance;
  return instance;
}

at::Tensor BatchInvariantArithmetic::linear(const at::Tensor& x, const at::Tensor& w) const {
  if (!x.is_cuda()) return Arithmetic::linear(x, w);
  TORCH_CHECK(cuda::invariant_linear_supported(x, w), "batch_invariant: the invariant GEMM (model/cuda/dense_gemm.h) does not take x ",
              x.sizes(), " ", x.scalar_type(), " times w ", w.sizes(), " ", w.scalar_type(), " strides ", w.strides(),
              " (bfloat16 needs K a multiple of 32, float32 a multiple of 4)");
  return cuda::invariant_linear(x, w, x.scalar_type());
}

at::Tensor BatchInvariantArithmetic::linear_fp8(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale) const {
  TORCH_CHECK(!x.is_cuda(),
              "batch_invariant: FP8 linears must be dequantized at load in this mode (the FP8 GEMM picks its algorithm "
              "from the row count); the job never keeps them with batch_invariant on");
  return Arithmetic::linear_fp8(x, codes, scale);
}

at::Tensor BatchInvariantArithmetic::group_linear(const at::Tensor& x, const at::Tensor& w) const {
  if (!x.is_cuda()) return Arithmetic::group_linear(x, w);
  return cuda::invariant_group_linear(x, w);  // every group in one launch, linear()'s arithmetic per group
}

at::Tensor BatchInvariantArithmetic::rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const {
  if (!x.is_cuda()) return Arithmetic::rms_norm(x, weight, eps);
  const at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor y = xf * at::rsqrt(sum_of_squares(xf) / static_cast<double>(x.size(-1)) + eps);
  if (weight.defined()) y = y * weight.to(at::kFloat);
  return y.to(x.scalar_type());
}

at::Tensor BatchInvariantArithmetic::hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const {
  if (!streams.is_cuda()) return Arithmetic::hc_projection(streams, fn, eps);
  const at::Tensor flat = streams.flatten(1).to(at::kFloat).contiguous();  // [T, n D]
  const at::Tensor inv_rms = at::rsqrt(sum_of_squares(flat) / static_cast<double>(flat.size(1)) + eps);
  return linear(flat, fn) * inv_rms;
}

bool BatchInvariantArithmetic::sums_slots_after_exchange() const { return true; }

at::Tensor BatchInvariantArithmetic::routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                                                  const at::Tensor& experts, const at::Tensor& routing_weights,
                                                  ExpertWorkspace* workspace) const {
  if (!x.is_cuda()) return Arithmetic::routed_slots(weights, layer, x, experts, routing_weights, workspace);
  if (workspace != nullptr && workspace->runs_fp4_kernels(weights, layer, x))
    return workspace->routed_slots(weights, layer, x, experts, routing_weights);
  return every_expert_slots(*this, weights, layer, x, experts, routing_weights);
}

}  // namespace deepinfer::model
