#pragma once
// mHC around a sub-block (the ATen reference: model/hyper_connection.h hc_mix, hc_collapse,
// the RMSNorm before the sub-block, and hc_expand with the official arithmetic), one kernel on
// each side of the sub-block:
//  - hc_pre, one block per token: inv_rms of the token's n D stream values (float32), the mix
//    raw / rms -> pre = sigmoid(. scale0 + base) + hc_eps, post = 2 sigmoid(. scale1 + base),
//    comb = Sinkhorn(. scale2 + base); the collapse sum_j pre_j stream_j rounded to bfloat16 as
//    the official code rounds it; then the sub-block's RMSNorm of it with its weight -> bfloat16.
//    `raw` is the projection of the float32 streams by fn (a matmul the caller makes).
//  - hc_post: new_k = post_k y + sum_j comb_jk stream_j in float32, rounded once to bfloat16.
// A token's results depend on its own inputs only (batch-invariant). Plain CUDA, no torch types.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct HcPreArgs {
  const __nv_bfloat16* streams = nullptr;  // [T, n, D]
  const float* raw = nullptr;              // [T, (2 + n) n]: the float32 streams times fn^T
  const float* scale = nullptr;            // [3]
  const float* base = nullptr;             // [(2 + n) n]
  const float* norm_weight = nullptr;      // [D] float32, or null with norm_weight_bf16
  const __nv_bfloat16* norm_weight_bf16 = nullptr;
  __nv_bfloat16* out = nullptr;  // [T, D] the sub-block's input
  float* post = nullptr;         // [T, n]
  float* comb = nullptr;         // [T, n, n]
  int64_t tokens = 0;
  int n = 0;             // 1, 2, 4 or 8
  int dim = 0;           // D: even, at most 16384
  int iters = 0;         // Sinkhorn iterations, >= 1
  float rms_eps = 0.0f;  // the projection's and the norm's
  float hc_eps = 0.0f;
};
cudaError_t hc_pre(const HcPreArgs& args, cudaStream_t stream);

struct HcPostArgs {
  const __nv_bfloat16* streams = nullptr;  // [T, n, D]
  const __nv_bfloat16* y = nullptr;        // [T, D] the sub-block's output
  const float* post = nullptr;             // [T, n]
  const float* comb = nullptr;             // [T, n, n]
  __nv_bfloat16* out = nullptr;            // [T, n, D]
  int64_t tokens = 0;
  int n = 0;
  int dim = 0;  // even
};
cudaError_t hc_post(const HcPostArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
