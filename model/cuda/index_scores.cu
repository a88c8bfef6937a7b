#include "model/cuda/index_scores.h"

#include <cmath>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kWarps = 4;  // warp w: heads 16 w .. 16 w + 15
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeads = 16 * kWarps;
constexpr int kTile = 64;    // entries per MMA pass: 8 tiles of 8
constexpr int kChunk = 512;  // entries per block
constexpr int kStages = 4;   // tiles in flight: the next ones load while one is scored
constexpr int kPad = 8;

template <int D>
constexpr size_t shared_bytes() {
  return size_t{kMaxHeads + kStages * kTile} * (D + kPad) * 2 + size_t{kWarps} * kChunk * sizeof(float);
}

// Tile `tile` of the block's entries (from e0) into k_s; entries past `visible` are not read.
// Entry e is row e % n of block table[e / n], n = 128 / ratio a power of two (shift, mask).
template <int D>
__device__ void load_tile(const IndexScoresArgs& a, const int64_t* table, int shift, int64_t e0, int64_t visible, int tile,
                          __nv_bfloat16* k_s) {
  constexpr int kStride = D + kPad, kChunks = D / 8;
  const int64_t mask = (int64_t{1} << shift) - 1;
  for (int i = threadIdx.x; i < kTile * kChunks; i += kThreads) {
    const int k = i / kChunks, c = i % kChunks;
    const int64_t e = e0 + tile * kTile + k;
    const bool valid = e < visible;
    const __nv_bfloat16* row = valid ? a.keys + ((table[e >> shift] << shift) + (e & mask)) * D : a.keys;
    copy16_async(k_s + k * kStride + c * 8, row + c * 8, valid);
  }
}

// One block: query row blockIdx.x, entries kChunk blockIdx.y .. + kChunk - 1, in tiles of 64
// through a ring of kStages shared buffers (cp.async, one commit group per tile). Tiles past
// the query's visible entries are neither read nor scored.
template <int D>
__global__ void __launch_bounds__(kThreads) index_scores_kernel(const IndexScoresArgs a) {
  constexpr int kStride = D + kPad, kChunks = D / 8;
  extern __shared__ __align__(16) unsigned char shared[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(shared);                 // [64][kStride]
  __nv_bfloat16* ring_s = q_s + kMaxHeads * kStride;                             // [kStages][kTile][kStride]
  float* part_s = reinterpret_cast<float*>(ring_s + kStages * kTile * kStride);  // [warps][kChunk]

  const int64_t query = blockIdx.x, seq = query / a.len;
  const int64_t position = a.start[seq] + a.first + query % a.len;
  const int64_t visible = min((position + 1) / a.ratio, a.entries);
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * kChunk;
  const int64_t scored = min(max(visible - e0, int64_t{0}), int64_t{kChunk});  // entries this block scores
  const int tiles = static_cast<int>((scored + kTile - 1) / kTile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, quad = lane % 4;
  const int64_t* table = a.block_tables + seq * a.block_stride;
  const int shift = __ffs(128 / a.ratio) - 1;  // log2 of the entries per block

  for (int i = threadIdx.x; i < kMaxHeads * kChunks; i += kThreads) {
    const int h = i / kChunks, c = i % kChunks;
    const bool valid = h < a.heads;
    copy16_async(q_s + h * kStride + c * 8, a.q + (query * a.heads + (valid ? h : 0)) * D + c * 8, valid);
  }
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {  // q joins tile 0's group
    if (t < tiles) load_tile<D>(a, table, shift, e0, visible, t, ring_s + t * kTile * kStride);
    commit_copies();
  }

  const float head_scale = static_cast<float>(std::sqrt(static_cast<double>(a.heads)));
  const int h0 = warp * 16 + g, h1 = h0 + 8;
  const float w0 = h0 < a.heads ? a.weights[query * a.heads + h0] / head_scale : 0.0f;
  const float w1 = h1 < a.heads ? a.weights[query * a.heads + h1] / head_scale : 0.0f;
  for (int tile = 0; tile < tiles; ++tile) {
    wait_copies<kStages - 2>();  // this tile's group has landed (one group is committed per iteration)
    __syncthreads();             // for every thread; and the buffer loaded next was scored by all
    if (tile + kStages - 1 < tiles)
      load_tile<D>(a, table, shift, e0, visible, tile + kStages - 1, ring_s + ((tile + kStages - 1) % kStages) * kTile * kStride);
    commit_copies();
    const __nv_bfloat16* k_s = ring_s + (tile % kStages) * kTile * kStride;
    float s[8][4] = {};
    if (warp * 16 < a.heads) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4];
        load_matrices(qa, q_s + (warp * 16 + lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int t = 0; t < 8; t += 2) {
          uint32_t kb[4];
          load_matrices(kb, k_s + (t * 8 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
          mma(s[t], qa, kb[0], kb[1]);
          mma(s[t + 1], qa, kb[2], kb[3]);
        }
      }
    }
    // relu(bf16(dot)) w_h, summed over this warp's 16 heads: the thread's two, then over g.
#pragma unroll
    for (int t = 0; t < 8; ++t) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float d0 = __bfloat162float(__float2bfloat16_rn(s[t][e])), d1 = __bfloat162float(__float2bfloat16_rn(s[t][2 + e]));
        float v = fmaxf(d0, 0.0f) * w0 + fmaxf(d1, 0.0f) * w1;
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g == 0) part_s[warp * kChunk + tile * kTile + t * 8 + 2 * quad + e] = v;
      }
    }
  }
  wait_copies<0>();  // none left in flight when the block ends (tiles == 0: q's copies)
  __syncthreads();
  const float dim_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
  for (int k = threadIdx.x; k < kChunk; k += kThreads) {
    const int64_t e = e0 + k;
    if (e >= a.entries) break;
    float total = 0.0f;
    if (e < visible) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += part_s[w * kChunk + k];
    }
    a.scores[query * a.entries + e] = e < visible ? total / dim_scale : -INFINITY;
  }
}

template <int D>
cudaError_t launch(const IndexScoresArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.num_seqs * a.len), static_cast<unsigned>((a.entries + kChunk - 1) / kChunk));
  return launch_with_shared(index_scores_kernel<D>, grid, kThreads, shared_bytes<D>(), stream, a);
}

}  // namespace

cudaError_t index_scores(const IndexScoresArgs& a, cudaStream_t stream) {
  if (a.q == nullptr || a.weights == nullptr || a.keys == nullptr || a.start == nullptr || a.block_tables == nullptr ||
      a.scores == nullptr || a.heads < 1 || a.heads > kMaxHeads || a.ratio < 1 || 128 % a.ratio != 0 || a.num_seqs < 0 || a.len < 0 ||
      a.entries < 0 || a.num_seqs * a.len > 0x7fffffff || (a.entries + kChunk - 1) / kChunk > 65535) {
    return cudaErrorInvalidValue;
  }
  if (a.num_seqs * a.len == 0 || a.entries == 0) return cudaSuccess;
  switch (a.dim) {
    case 32: return launch<32>(a, stream);
    case 64: return launch<64>(a, stream);
    case 128: return launch<128>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace deepinfer::model::cuda
