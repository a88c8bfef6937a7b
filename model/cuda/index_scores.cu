#include "model/cuda/index_scores.h"

#include <cmath>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kGroupWarps = 4;           // warp w of a group: heads 16 w .. 16 w + 15
constexpr int kWarps = 2 * kGroupWarps;  // two groups: group t % 2 scores tile t of each pair
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeads = 16 * kGroupWarps;
constexpr int kTile = 64;   // entries per MMA pass: 8 tiles of 8
constexpr int kStages = 6;  // tile buffers: two scored while the next four load
constexpr int kMaxTilesPerBlock = 32;
constexpr int kPad = 8;

template <int D>
constexpr size_t shared_bytes() {
  return size_t{kStages} * kTile * (D + kPad) * 2 + size_t{kWarps} * kTile * sizeof(float);
}

// Tile `tile` of the block's entries (from e0) into k_s; entries past `visible` are not read.
// Entry e is row e % n of block table[e / n], n = 128 / ratio a power of two (shift, mask).
template <int D>
__device__ void load_tile(const IndexScoresArgs& a, const int64_t* table, int shift, int64_t e0, int64_t visible, int tile,
                          __nv_bfloat16* k_s) {
  constexpr int kStride = D + kPad, kChunks = D / 8;
  static_assert(kTile * kChunks % kThreads == 0, "whole copies per thread");
  const int64_t mask = (int64_t{1} << shift) - 1;
#pragma unroll
  for (int j = 0; j < kTile * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, k = i / kChunks, c = i % kChunks;
    const int64_t e = e0 + tile * kTile + k;
    const bool valid = e < visible;
    const __nv_bfloat16* row = valid ? a.keys + ((table[e >> shift] << shift) + (e & mask)) * D : a.keys;
    copy16_async(k_s + k * kStride + c * 8, row + c * 8, valid);
  }
}

// One block: query row blockIdx.x, entries `tiles_per_block` tiles of 64 from tile
// blockIdx.y tiles_per_block, through a ring of kStages shared buffers (cp.async, one commit
// group per tile). Each step the two groups of four warps score one tile each (q in registers,
// 16 heads a warp), then the block sums each entry's four head partials in warp order and
// writes the scores. Tiles past the query's visible entries are neither read nor scored. How
// many entries a block takes changes only which block computes an entry, never how: a row's
// scores do not depend on the batch.
template <int D>
__global__ void __launch_bounds__(kThreads, 2) index_scores_kernel(const IndexScoresArgs a, int tiles_per_block) {
  constexpr int kStride = D + kPad, kSteps = D / 16;
  extern __shared__ __align__(16) unsigned char shared[];
  __nv_bfloat16* ring_s = reinterpret_cast<__nv_bfloat16*>(shared);              // [kStages][kTile][kStride]
  float* part_s = reinterpret_cast<float*>(ring_s + kStages * kTile * kStride);  // [2 groups][kGroupWarps][kTile]

  const int64_t query = blockIdx.x, seq = query / a.len;
  const int64_t position = a.start[seq] + a.first + query % a.len;
  const int64_t visible = min((position + 1) / a.ratio, a.entries);
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * tiles_per_block * kTile;
  const int64_t written = min(a.entries - e0, static_cast<int64_t>(tiles_per_block) * kTile);  // entries this block writes
  const int64_t scored = min(max(visible - e0, int64_t{0}), written);                          // of which visible
  const int tiles = static_cast<int>((scored + kTile - 1) / kTile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, quad = lane % 4;
  const int group = warp / kGroupWarps, head_warp = warp % kGroupWarps;
  const int64_t* table = a.block_tables + seq * a.block_stride;
  const int shift = __ffs(128 / a.ratio) - 1;  // log2 of the entries per block
  float* scores = a.scores + query * a.entries + e0;

#pragma unroll
  for (int t = 0; t < kStages - 2; ++t) {
    if (t < tiles) load_tile<D>(a, table, shift, e0, visible, t, ring_s + t * kTile * kStride);
    commit_copies();
  }

  // This warp's q as MMA A fragments (rows: heads h0 and h1 = h0 + 8), 0 for missing heads.
  const int h0 = head_warp * 16 + g, h1 = h0 + 8;
  const bool has0 = h0 < a.heads, has1 = h1 < a.heads;
  const __nv_bfloat16* q0 = a.q + (query * a.heads + (has0 ? h0 : 0)) * D + 2 * quad;
  const __nv_bfloat16* q1 = a.q + (query * a.heads + (has1 ? h1 : 0)) * D + 2 * quad;
  uint32_t qa[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    qa[kk][0] = has0 ? *reinterpret_cast<const uint32_t*>(q0 + kk * 16) : 0u;
    qa[kk][1] = has1 ? *reinterpret_cast<const uint32_t*>(q1 + kk * 16) : 0u;
    qa[kk][2] = has0 ? *reinterpret_cast<const uint32_t*>(q0 + kk * 16 + 8) : 0u;
    qa[kk][3] = has1 ? *reinterpret_cast<const uint32_t*>(q1 + kk * 16 + 8) : 0u;
  }
  const float head_scale = static_cast<float>(std::sqrt(static_cast<double>(a.heads)));
  const float dim_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
  const float w0 = has0 ? a.weights[query * a.heads + h0] / head_scale : 0.0f;
  const float w1 = has1 ? a.weights[query * a.heads + h1] / head_scale : 0.0f;

  for (int pair = 0; 2 * pair < tiles; ++pair) {
    wait_copies<kStages - 4>();  // tiles 2 pair and 2 pair + 1 have landed (one group is committed per tile)
    __syncthreads();             // for every thread; the previous pair's buffers and partials are free
#pragma unroll
    for (int t = 2 * pair + kStages - 2; t < 2 * pair + kStages; ++t) {
      if (t < tiles) load_tile<D>(a, table, shift, e0, visible, t, ring_s + (t % kStages) * kTile * kStride);
      commit_copies();
    }
    const int tile = 2 * pair + group;
    if (tile < tiles) {
      const __nv_bfloat16* k_s = ring_s + (tile % kStages) * kTile * kStride;
      float s[8][4] = {};
      if (head_warp * 16 < a.heads) {
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
          for (int t = 0; t < 8; t += 2) {
            uint32_t kb[4];
            load_matrices(kb, k_s + (t * 8 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
            mma(s[t], qa[kk], kb[0], kb[1]);
            mma(s[t + 1], qa[kk], kb[2], kb[3]);
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
          if (g == 0) part_s[warp * kTile + t * 8 + 2 * quad + e] = v;
        }
      }
    }
    __syncthreads();                // the pair's partials are in
    if (threadIdx.x < 2 * kTile) {  // entry k of tile 2 pair + which: its heads' partials in warp order
      const int which = threadIdx.x / kTile, k = threadIdx.x % kTile, t = 2 * pair + which;
      const int64_t offset = static_cast<int64_t>(t) * kTile + k;
      if (t < tiles && offset < written) {
        float total = 0.0f;
#pragma unroll
        for (int w = 0; w < kGroupWarps; ++w) total += part_s[(which * kGroupWarps + w) * kTile + k];
        scores[offset] = e0 + offset < visible ? total / dim_scale : -INFINITY;
      }
    }
  }
  for (int64_t offset = static_cast<int64_t>(tiles) * kTile + threadIdx.x; offset < written; offset += kThreads) scores[offset] = -INFINITY;
}

template <int D>
cudaError_t launch(const IndexScoresArgs& a, cudaStream_t stream) {
  // Enough blocks for about four rounds of two per SM; a block's share changes no score's arithmetic.
  const int64_t row_tiles = (a.entries + kTile - 1) / kTile, rows = a.num_seqs * a.len;
  const int64_t wanted = (rows * row_tiles + 4 * 2 * 132 - 1) / (4 * 2 * 132);
  int tiles_per_block = static_cast<int>(min(max(wanted, int64_t{2}), int64_t{kMaxTilesPerBlock}));
  if ((row_tiles + tiles_per_block - 1) / tiles_per_block > 65535) tiles_per_block = static_cast<int>((row_tiles + 65534) / 65535);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((row_tiles + tiles_per_block - 1) / tiles_per_block));
  return launch_with_shared(index_scores_kernel<D>, grid, kThreads, shared_bytes<D>(), stream, a, tiles_per_block);
}

}  // namespace

cudaError_t index_scores(const IndexScoresArgs& a, cudaStream_t stream) {
  if (a.q == nullptr || a.weights == nullptr || a.keys == nullptr || a.start == nullptr || a.block_tables == nullptr ||
      a.scores == nullptr || a.heads < 1 || a.heads > kMaxHeads || a.ratio < 1 || 128 % a.ratio != 0 || a.num_seqs < 0 || a.len < 0 ||
      a.entries < 0 || a.num_seqs * a.len > 0x7fffffff) {
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
