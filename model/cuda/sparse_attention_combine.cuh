#pragma once
// The merge of a row's split partials (the split kernels of model/cuda/sparse_attention.cu and
// sparse_attention_sm90.cu write them to the workspace when a launch has rows of 3+ splits).
// Internal: included by sparse_attention.cu alone.

#include <cuda_bf16.h>

#include "model/cuda/sparse_attention.h"
#include "model/cuda/sparse_attention_keys.cuh"

namespace deepinfer::model::cuda::attention {

// The splits of a row with more than one, merged in split order with the sink: block (query
// row, head), thread t: dims 4t .. 4t + 3. kBf16Partials: the partials are bfloat16 (the Hopper
// kernel's, sparse_attention_sm90_merge.cuh), at the start of the float32 partials' space.
template <int D, bool kBf16Partials>
__global__ void __launch_bounds__(D / 4) combine_kernel(const SparseAttentionArgs a, int64_t max_splits) {
  const int64_t query = a.first_query + blockIdx.x, h = blockIdx.y;
  const int64_t seq = query / a.len, position = a.start[seq] + query % a.len;
  const int64_t window_keys = min(static_cast<int64_t>(a.window), position + 1);
  const int64_t splits = splits_of(window_keys + (a.ratio == 0 ? 0 : (a.picks != nullptr ? a.num_picks : (position + 1) / a.ratio)));
  if (splits == 1) return;
  const float* stats = a.workspace + static_cast<int64_t>(gridDim.x) * max_splits * a.heads * D;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * max_splits) * a.heads + h;  // part of split s: first + s heads
  float m = a.sink[h] * kLog2e;
  for (int64_t s = 0; s < splits; ++s) m = fmaxf(m, stats[2 * (first + s * a.heads)]);
  float denominator = exp2f(a.sink[h] * kLog2e - m);
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int64_t s = 0; s < splits; ++s) {
    const int64_t part = first + s * a.heads;
    const float weight = exp2f(stats[2 * part] - m);  // 0 for a split without a valid key (max -inf)
    denominator += stats[2 * part + 1] * weight;
    float4 v;
    if constexpr (kBf16Partials) {
      const uint2 bits = reinterpret_cast<const uint2*>(reinterpret_cast<const __nv_bfloat16*>(a.workspace) + part * D)[threadIdx.x];
      const float2 lo = unpack_partials(bits.x), hi = unpack_partials(bits.y);
      v = make_float4(lo.x, lo.y, hi.x, hi.y);
    } else {
      v = reinterpret_cast<const float4*>(a.workspace + part * D)[threadIdx.x];
    }
    o.x += v.x * weight;
    o.y += v.y * weight;
    o.z += v.z * weight;
    o.w += v.w * weight;
  }
  const float inv = 1.0f / denominator;
  __nv_bfloat16* out = a.out + (a.query_rows[query] * a.heads + h) * D + 4 * threadIdx.x;
  reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(o.x * inv, o.y * inv);
  reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(o.z * inv, o.w * inv);
}

}  // namespace deepinfer::model::cuda::attention
