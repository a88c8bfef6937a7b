#include "model/cuda/sparse_attention.h"

#include <cmath>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kHeads = 16;  // heads per block: the MMA's M
constexpr int kKeys = 64;   // keys per tile: 16 per warp for the scores
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;  // bfloat16 elements of padding per shared row: ldmatrix rows fall in distinct banks
constexpr float kLog2e = 1.4426950408889634f;

// What one query row attends over.
struct QueryKeys {
  int64_t seq, query, position, start, slot;
  int64_t window_keys;      // min(W, position + 1)
  int64_t compressed_keys;  // HCA: visible entries; CSA: the picks (some may be -1)
};

// Key j of a query's list (window first, oldest position first; then the compressed entries in
// entry / pick order), or null for a pick of -1 and j past the end.
template <int D>
__device__ const __nv_bfloat16* key_row(const SparseAttentionArgs& a, const QueryKeys& k, int64_t j) {
  if (j < k.window_keys) {
    const int64_t p = k.position - k.window_keys + 1 + j;
    if (p < k.start) return a.ring + (k.slot * a.window + p % a.window) * D;
    return a.kv + a.query_rows[k.seq * a.len + (p - k.start)] * D;
  }
  const int64_t c = j - k.window_keys;
  if (c >= k.compressed_keys) return nullptr;
  const int64_t w = a.picks != nullptr ? a.picks[k.query * a.num_picks + c] : c;
  if (w < 0) return nullptr;
  const int64_t per_block = 128 / a.ratio;
  const int64_t block = a.block_tables[k.seq * a.block_stride + (w * a.ratio) / 128];
  return a.entries + (block * per_block + w % per_block) * D;
}

template <int D>
constexpr size_t shared_bytes() {
  return size_t{kHeads + kKeys} * (D + kPad) * 2 + size_t{kHeads} * (kKeys + kPad) * 2 + 2 * kWarps * kHeads * sizeof(float) +
         kKeys * sizeof(void*);
}

// One block: query blockIdx.x of the group, heads 16 blockIdx.y .. + 15. Warp w scores keys
// 16w..16w+15 of each tile for all 16 heads, then accumulates P V into output dims
// w D/4 .. (w+1) D/4 - 1. Scores and the running max / sum are in log2 units.
template <int D>
__global__ void __launch_bounds__(kThreads) sparse_attention_kernel(const SparseAttentionArgs a) {
  constexpr int kStride = D + kPad, kPStride = kKeys + kPad, kChunks = D / 8, kTiles = D / 32;
  extern __shared__ __align__(16) unsigned char shared[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(shared);                                    // [16][kStride]
  __nv_bfloat16* k_s = q_s + kHeads * kStride;                                                      // [64][kStride]
  __nv_bfloat16* p_s = k_s + kKeys * kStride;                                                       // [16][kPStride]
  float* max_s = reinterpret_cast<float*>(p_s + kHeads * kPStride);                                 // [warps][16]
  float* sum_s = max_s + kWarps * kHeads;                                                           // [warps][16]
  const __nv_bfloat16** rows_s = reinterpret_cast<const __nv_bfloat16**>(sum_s + kWarps * kHeads);  // [64]

  QueryKeys k;
  k.query = blockIdx.x;
  k.seq = k.query / a.len;
  k.start = a.start[k.seq];
  k.position = k.start + k.query % a.len;
  k.slot = a.slots[k.seq];
  k.window_keys = min(static_cast<int64_t>(a.window), k.position + 1);
  k.compressed_keys = a.ratio == 0 ? 0 : (a.picks != nullptr ? a.num_picks : (k.position + 1) / a.ratio);
  const int64_t num_keys = k.window_keys + k.compressed_keys;
  const int64_t row = a.query_rows[k.query];
  const int h0 = blockIdx.y * kHeads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, quad = lane % 4;

  for (int i = threadIdx.x; i < kHeads * kChunks; i += kThreads) {
    const int h = i / kChunks, c = i % kChunks;
    const bool valid = h0 + h < a.heads;
    copy16_async(q_s + h * kStride + c * 8, a.q + (row * a.heads + (valid ? h0 + h : 0)) * D + c * 8, valid);
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads g and g + 8
  float acc[kTiles][4] = {};
  const float scale = a.scale * kLog2e;
  for (int64_t k0 = 0; k0 < num_keys; k0 += kKeys) {
    if (threadIdx.x < kKeys) rows_s[threadIdx.x] = key_row<D>(a, k, k0 + threadIdx.x);
    __syncthreads();  // the key rows are known; the previous tile's readers of k_s and p_s are done
    for (int i = threadIdx.x; i < kKeys * kChunks; i += kThreads) {
      const int key = i / kChunks, c = i % kChunks;
      const __nv_bfloat16* src = rows_s[key];
      copy16_async(k_s + key * kStride + c * 8, src != nullptr ? src + c * 8 : a.q, src != nullptr);
    }
    commit_copies();
    wait_copies<0>();
    __syncthreads();

    // Scores of keys 16 warp .. + 15: two 16 x 8 tiles.
    float s[2][4] = {};
#pragma unroll 8
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], kb[4];
      load_matrices(qa, q_s + (lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
      load_matrices(kb, k_s + (warp * 16 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
      mma(s[0], qa, kb[0], kb[1]);
      mma(s[1], qa, kb[2], kb[3]);
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = rows_s[warp * 16 + t * 8 + 2 * quad + e] != nullptr;
        s[t][e] = valid ? s[t][e] * scale : -INFINITY;
        s[t][2 + e] = valid ? s[t][2 + e] * scale : -INFINITY;
        tile_max[0] = fmaxf(tile_max[0], s[t][e]);
        tile_max[1] = fmaxf(tile_max[1], s[t][2 + e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    }
    if (quad == 0) {
      max_s[warp * kHeads + g] = tile_max[0];
      max_s[warp * kHeads + g + 8] = tile_max[1];
    }
    __syncthreads();
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = m_run[r];
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, max_s[w * kHeads + g + 8 * r]);
      base[r] = m == -INFINITY ? 0.0f : m;  // no valid key yet: every p is 0
      alpha[r] = exp2f(m_run[r] - base[r]);
      m_run[r] = m;
    }
    float p_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int col = warp * 16 + t * 8 + 2 * quad;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = exp2f(s[t][2 * r] - base[r]), p1 = exp2f(s[t][2 * r + 1] - base[r]);
        p_sum[r] += p0 + p1;
        *reinterpret_cast<__nv_bfloat162*>(p_s + (g + 8 * r) * kPStride + col) = __floats2bfloat162_rn(p0, p1);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 1);
      p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 2);
    }
    if (quad == 0) {
      sum_s[warp * kHeads + g] = p_sum[0];
      sum_s[warp * kHeads + g + 8] = p_sum[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) tile_sum += sum_s[w * kHeads + g + 8 * r];
      l_run[r] = l_run[r] * alpha[r] + tile_sum;
    }

    // P V (V = K) into this warp's D/4 output dims.
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      acc[t][0] *= alpha[0];
      acc[t][1] *= alpha[0];
      acc[t][2] *= alpha[1];
      acc[t][3] *= alpha[1];
    }
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t pa[4];
      load_matrices(pa, p_s + (lane % 16) * kPStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int t = 0; t < kTiles; t += 2) {
        uint32_t vb[4];
        const int d0 = warp * (D / 4) + t * 8;
        load_matrices_transposed(vb, k_s + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kStride + d0 + (lane / 16) * 8);
        mma(acc[t], pa, vb[0], vb[1]);
        mma(acc[t + 1], pa, vb[2], vb[3]);
      }
    }
  }

  // The sink joins the denominator: softmax over [scores, sink].
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = h0 + g + 8 * r;
    if (h >= a.heads) continue;
    const float sink = a.sink[h] * kLog2e;
    const float m = fmaxf(m_run[r], sink);
    const float kept = exp2f(m_run[r] - m);
    const float factor = kept / (l_run[r] * kept + exp2f(sink - m));
    __nv_bfloat16* out = a.out + (row * a.heads + h) * D + warp * (D / 4) + 2 * quad;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
      *reinterpret_cast<__nv_bfloat162*>(out + t * 8) = __floats2bfloat162_rn(acc[t][2 * r] * factor, acc[t][2 * r + 1] * factor);
  }
}

template <int D>
cudaError_t launch(const SparseAttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.num_seqs * a.len), static_cast<unsigned>((a.heads + kHeads - 1) / kHeads));
  return launch_with_shared(sparse_attention_kernel<D>, grid, kThreads, shared_bytes<D>(), stream, a);
}

}  // namespace

cudaError_t sparse_attention(const SparseAttentionArgs& a, cudaStream_t stream) {
  const bool paged = a.ratio > 0;
  if (a.q == nullptr || a.kv == nullptr || a.ring == nullptr || a.query_rows == nullptr || a.start == nullptr || a.slots == nullptr ||
      a.sink == nullptr || a.out == nullptr || a.heads < 1 || a.window < 1 || a.ratio < 0 || (paged && 128 % a.ratio != 0) ||
      (paged && (a.entries == nullptr || a.block_tables == nullptr)) || (a.picks != nullptr && a.num_picks < 1) || a.num_seqs < 0 ||
      a.len < 0 || a.num_seqs * a.len > 0x7fffffff || a.heads > 65535 * kHeads) {
    return cudaErrorInvalidValue;
  }
  if (a.num_seqs * a.len == 0) return cudaSuccess;
  switch (a.head_dim) {
    case 64: return launch<64>(a, stream);
    case 128: return launch<128>(a, stream);
    case 256: return launch<256>(a, stream);
    case 512: return launch<512>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace deepinfer::model::cuda
