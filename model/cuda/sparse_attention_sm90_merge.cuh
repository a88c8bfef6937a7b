#pragma once
// The merge of a row's splits in the Hopper attention kernel (model/cuda/sparse_attention_sm90.cu):
// two splits in their thread-block cluster (merge_pair), more through combine_kernel's partials
// (write_partials). A split's partial goes into the merge rounded to bfloat16 (as vLLM's and
// FlashInfer's split merges take their partial outputs in the output type), with its (max, sum) in
// float32, on both ways, so a row's bits do not depend on which way its launch took; the
// arithmetic after that is combine_kernel's (sparse_attention_combine.cuh), term for term.
// Internal: included by that file alone.

#include <cuda_bf16.h>

#include "model/cuda/sm90_sync.cuh"
#include "model/cuda/sm90_trace.cuh"
#include "model/cuda/sparse_attention.h"
#include "model/cuda/sparse_attention_sm90_layout.cuh"

namespace deepinfer::model::cuda::sm90 {

// Thread t's head r (0, 1) and first dim in the accumulator layout (Part of thread t).
__device__ __forceinline__ int head_of(int t, int r) { return 16 * ((t / 32) % 4) + (t % 32) / 4 + 8 * r; }
__device__ __forceinline__ int dim_of(int t) { return (t / 128) * (kD / 2) + 2 * (t % 4); }

// The factors of a head's two partials and of their sum in the merge of combine_kernel
// (sparse_attention_combine.cuh), term for term: `first`, `second` the (max, sum) of splits 0
// and 1.
struct MergeFactors {
  float w0, w1, inv;
};
__device__ __forceinline__ MergeFactors merge_factors(float sink, float2 first, float2 second) {
  float m = sink * kLog2e;
  m = fmaxf(m, first.x);
  m = fmaxf(m, second.x);
  float denominator = exp2f(sink * kLog2e - m);
  const float w0 = exp2f(first.x - m);  // 0 for a split without a valid key (max -inf)
  denominator += first.y * w0;
  const float w1 = exp2f(second.x - m);
  denominator += second.y * w1;
  return {w0, w1, 1.0f / denominator};
}

// Head r's four values of jj (dims d, d + 1, d + 8, d + 9 of acc's layout), as the merge takes them.
__device__ __forceinline__ float4 partial4(const float (&acc)[128], int jj, int r) {
  return make_float4(partial_value(acc[8 * jj + 2 * r]), partial_value(acc[8 * jj + 2 * r + 1]), partial_value(acc[8 * jj + 4 + 2 * r]),
                     partial_value(acc[8 * jj + 5 + 2 * r]));
}

// Four merged outputs of one head from the two splits' float4 of [j / 2][r][thread] (dims d, d + 1,
// d + 8, d + 9): out at d and d + 8.
__device__ __forceinline__ void merge_float4(__nv_bfloat16* out, float4 x0, float4 x1, const MergeFactors& f) {
  const float v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
  float o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    o[e] = 0.0f;
    o[e] += v0[e] * f.w0;
    o[e] += v1[e] * f.w1;
  }
  if (kSkip & 8) {  // timing only: the merged outputs' stores left out, not their arithmetic (a condition that never holds)
    if (o[0] * f.inv == -1234.5f) *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(o[1], o[2] + o[3]);
    return;
  }
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(o[0] * f.inv, o[1] * f.inv);
  *reinterpret_cast<__nv_bfloat162*>(out + 8) = __floats2bfloat162_rn(o[2] * f.inv, o[3] * f.inv);
}

// The bytes a split of a pair receives: the other split's partial and (max, sum) of each head it owns.
__device__ __forceinline__ uint32_t pair_bytes(int split, int heads) {
  const int boundary = share_begin(1, 2, heads);
  return static_cast<uint32_t>(split == 0 ? boundary : heads - boundary) * (kD * 2 + 8);
}

// Where the other split's partial of head h (bfloat16: dims 16 jj + 2 quad + {0, 1, 8, 9} of group
// g's half for jj = 2 jp and 2 jp + 1) lands in its owner: [jp][g][h - first owned head][quad] 16
// bytes, 32 KB in the space q held (a split owns at most 32 heads; a warp's 8 heads are 512
// contiguous bytes).
__device__ __forceinline__ int received_index(int jp, int group, int slot, int quad) { return ((jp * 2 + group) * 32 + slot) * 4 + quad; }

// A row of two splits merged in its cluster. Head h belongs to the split of its share (heads below
// share_begin(1, 2, heads) to split 0). Each split sends its partials of the other's heads in
// bfloat16 (32 KB), with their (max, sum), by st.async completing on the owner's mbarrier
// `received_s` (pair_bytes of them expected on it as the kernel started), into the owner's q space
// once the owner's group 0 is past its last scores (its four warps' arrivals on the sender's
// `q_free_s`): no cluster barrier after the tiles. Then every thread of the owner merges in split
// order: thread t its own j < 16 from registers and thread t ^ 64's j >= 16, which t ^ 64 left in
// the second key buffer (so the threads that sent have work too). Called by both blocks of a pair,
// after their tiles.
__device__ void merge_pair(const SparseAttentionArgs& a, int64_t row, int split, unsigned char* shared, uint64_t* received_s,
                           uint64_t* q_free_s, const float (&acc)[128], const float* max_s, const float* sum_s, const float* sink_s,
                           const Part& p) {
  static_assert(kMaxClusterSplits == 2, "a cluster merges two splits");
  uint4* received = reinterpret_cast<uint4*>(shared + Shared::kQ);
  float4* kept = reinterpret_cast<float4*>(shared + Shared::kK + kTileBytes);   // [j / 2 - 8][r][thread]
  float2* received_stats = reinterpret_cast<float2*>(shared + Shared::kStats);  // [head]
  const int boundary = share_begin(1, 2, a.heads);
  const int first = split == 0 ? 0 : boundary, other_first = split == 0 ? boundary : 0;
  const auto owned = [&](int h) { return h < a.heads && (h < boundary ? 0 : 1) == split; };
  const int partner = threadIdx.x ^ 64;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (!owned(r == 0 ? p.r0 : p.r1)) continue;
#pragma unroll
    for (int jj = 8; jj < 16; ++jj) kept[((jj - 8) * 2 + r) * kThreads + threadIdx.x] = partial4(acc, jj, r);
  }
  wait_barrier_cluster(q_free_s, 0);  // the other split's q space is free
  trace(61);
  const uint32_t remote_received = remote_address(received_s, 1 - split);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r == 0 ? p.r0 : p.r1;
    if (h >= a.heads || owned(h)) continue;
    const uint32_t dst = remote_address(received + received_index(0, p.group, h - other_first, p.quad), 1 - split);
#pragma unroll
    for (int jp = 0; jp < 8; ++jp) {
      const float* x = acc + 16 * jp + 2 * r;  // jj = 2 jp at x[0, 1, 4, 5], 2 jp + 1 at x[8, 9, 12, 13]
      const uint4 packed = {pack_partials(x[0], x[1]), pack_partials(x[4], x[5]), pack_partials(x[8], x[9]), pack_partials(x[12], x[13])};
      store_async(dst + received_index(jp, 0, 0, 0) * 16, packed, remote_received);
    }
    if (p.group == 0 && p.quad == 0) store_async(remote_address(received_stats + h, 1 - split), max_s[h], sum_s[h], remote_received);
  }
  __syncthreads();                      // the kept halves are in
  wait_barrier_cluster(received_s, 0);  // and every byte of the other split's partials
  trace(62);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = half == 0 ? static_cast<int>(threadIdx.x) : partner;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = head_of(t, r);
      if (!owned(h)) continue;
      const float2 own = make_float2(max_s[h], sum_s[h]), other = received_stats[h];
      const MergeFactors f = merge_factors(sink_s[h], split == 0 ? own : other, split == 0 ? other : own);
      __nv_bfloat16* out = a.out + (row * a.heads + h) * kD + dim_of(t);
#pragma unroll
      for (int jj = 8 * half; jj < 8 * half + 8; ++jj) {
        const float4 mine = half == 0 ? partial4(acc, jj, r) : kept[((jj - 8) * 2 + r) * kThreads + t];
        const uint4 packed = received[received_index(jj / 2, p.group, h - first, p.quad)];
        const float2 lo = unpack_partials(jj % 2 == 0 ? packed.x : packed.z), hi = unpack_partials(jj % 2 == 0 ? packed.y : packed.w);
        const float4 theirs = make_float4(lo.x, lo.y, hi.x, hi.y);
        merge_float4(out + 16 * jj, split == 0 ? mine : theirs, split == 0 ? theirs : mine, f);
      }
    }
  }
}

// A row of several splits merged by combine_kernel (sparse_attention_combine.cuh): this split's
// partials in bfloat16 (as merge_pair takes them; at the start of a.workspace, where float32
// partials would be) and (max, sum) in float32 into a.workspace.
__device__ __forceinline__ void write_partials(const SparseAttentionArgs& a, int64_t max_splits, int64_t split, const float (&acc)[128],
                                               const float* max_s, const float* sum_s, const Part& p) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r == 0 ? p.r0 : p.r1;
    if (h >= a.heads) continue;
    const int64_t part = (static_cast<int64_t>(blockIdx.x) * max_splits + split) * a.heads + h;  // this launch's row
    uint32_t* out = reinterpret_cast<uint32_t*>(reinterpret_cast<__nv_bfloat16*>(a.workspace) + part * kD + p.d0);
#pragma unroll
    for (int j = 0; j < 32; ++j) out[4 * j] = pack_partials(acc[4 * j + 2 * r], acc[4 * j + 2 * r + 1]);
    if (p.group == 0 && p.quad == 0) {
      float* stats = a.workspace + static_cast<int64_t>(gridDim.x) * max_splits * a.heads * kD;
      stats[2 * part] = max_s[h];
      stats[2 * part + 1] = sum_s[h];
    }
  }
}

}  // namespace deepinfer::model::cuda::sm90
