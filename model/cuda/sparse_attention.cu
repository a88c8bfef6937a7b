#include "model/cuda/sparse_attention.h"

#include <cmath>

#include "model/cuda/mma.cuh"
#include "model/cuda/sparse_attention_combine.cuh"
#include "model/cuda/sparse_attention_heads.h"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/sparse_attention_sm90.h"

namespace deepinfer::model::cuda {
namespace {

using namespace attention;

constexpr int kHeads = 16;  // heads per block: the MMA's M
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;  // bfloat16 elements of padding per shared row: ldmatrix rows fall in distinct banks

// A warp's score tiles s[t] (16 heads x 8 keys; key 8 t + 2 quad + e of `rows`) scaled to log2
// units, -inf where the key is missing (null row); the maxima of heads g and g + 8 over the
// warp's keys, reduced over the quad.
template <int T>
__device__ void scale_and_max(float (&s)[T][4], const __nv_bfloat16* const* rows, int quad, float scale, float (&tile_max)[2]) {
  tile_max[0] = tile_max[1] = -INFINITY;
#pragma unroll
  for (int t = 0; t < T; ++t) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool valid = rows[t * 8 + 2 * quad + e] != nullptr;
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
    float tile_max[2];
    scale_and_max(s, rows_s + warp * 16, quad, scale, tile_max);
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

// --- All heads of a row in one block, its keys split by their count (heads 33..64) ---
//
// One block per (query row, split): 8 warps, the row's (up to) 64 heads, keys kSplitKeys at a
// time per split, so a key tile is read once for all heads. Warp w holds heads 16 (w % 4) ..
// + 15; it scores keys 32 (w / 4) .. + 31 of each tile and accumulates output dims
// (w / 4) D / 2 .. + D / 2 - 1. The next tile loads (cp.async) while one is used. A row's
// splits depend on its own key count only; with one split the block writes the output, else
// each split writes its unnormalised output and running max / sum to the workspace and
// combine_kernel (sparse_attention_combine.cuh) merges them in split order.
constexpr int kSplitWarps = 8;
constexpr int kSplitThreads = 32 * kSplitWarps;
constexpr size_t kWorkspaceBytes = size_t{256} << 20;  // partials per launch at most: rows go in batches

template <int D>
constexpr size_t split_shared_bytes() {
  return size_t{kAllHeads + 2 * kKeys} * (D + kPad) * 2 + size_t{kAllHeads} * (kKeys + kPad) * 2 + 2 * 2 * kAllHeads * sizeof(float) +
         kMaxSplitKeys * sizeof(void*);
}

template <int D>
__global__ void __launch_bounds__(kSplitThreads, 1) split_attention_kernel(const SparseAttentionArgs a, int64_t max_splits) {
  constexpr int kStride = D + kPad, kPStride = kKeys + kPad, kChunks = D / 8, kTiles = D / 16;  // kTiles: n-tiles of 8 in D / 2
  extern __shared__ __align__(16) unsigned char shared[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(shared);                                  // [64][kStride]
  __nv_bfloat16* k_s = q_s + kAllHeads * kStride;                                                 // [2][64][kStride]
  __nv_bfloat16* p_s = k_s + 2 * kKeys * kStride;                                                 // [64][kPStride]
  float* max_s = reinterpret_cast<float*>(p_s + kAllHeads * kPStride);                            // [2][64]
  float* sum_s = max_s + 2 * kAllHeads;                                                           // [2][64]
  const __nv_bfloat16** rows_s = reinterpret_cast<const __nv_bfloat16**>(sum_s + 2 * kAllHeads);  // [kMaxSplitKeys]

  QueryKeys k;
  k.query = a.first_query + blockIdx.x;
  k.seq = k.query / a.len;
  k.start = a.start[k.seq];
  k.position = k.start + k.query % a.len;
  k.slot = a.slots[k.seq];
  k.window_keys = min(static_cast<int64_t>(a.window), k.position + 1);
  k.compressed_keys = a.ratio == 0 ? 0 : (a.picks != nullptr ? a.num_picks : (k.position + 1) / a.ratio);
  const int64_t num_keys = k.window_keys + k.compressed_keys, splits = splits_of(num_keys), per_split = split_keys_of(num_keys);
  const int64_t split = blockIdx.y;
  if (split >= splits) return;
  const int64_t first_key = split * per_split;
  const int split_keys = static_cast<int>(min(num_keys - first_key, per_split));
  const int tiles = (split_keys + kKeys - 1) / kKeys;
  const int64_t row = a.query_rows[k.query];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, quad = lane % 4;
  const int m_tile = warp % 4, half = warp / 4;

  for (int j = threadIdx.x; j < tiles * kKeys; j += kSplitThreads) rows_s[j] = j < split_keys ? key_row<D>(a, k, first_key + j) : nullptr;
  for (int i = threadIdx.x; i < kAllHeads * kChunks; i += kSplitThreads) {
    const int h = i / kChunks, c = i % kChunks;
    const bool valid = h < a.heads;
    copy16_async(q_s + h * kStride + c * 8, a.q + (row * a.heads + (valid ? h : 0)) * D + c * 8, valid);
  }
  __syncthreads();  // rows_s
  const auto load_tile = [&](int tile) {
    __nv_bfloat16* dst = k_s + (tile % 2) * kKeys * kStride;
    for (int i = threadIdx.x; i < kKeys * kChunks; i += kSplitThreads) {
      const int key = i / kChunks, c = i % kChunks;
      const __nv_bfloat16* src = rows_s[tile * kKeys + key];
      copy16_async(dst + key * kStride + c * 8, src != nullptr ? src + c * 8 : a.q, src != nullptr);
    }
    commit_copies();
  };
  load_tile(0);

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads 16 m_tile + g and + 8
  float acc[kTiles][4] = {};
  const float scale = a.scale * kLog2e;
  for (int tile = 0; tile < tiles; ++tile) {
    wait_copies<0>();
    __syncthreads();  // tile `tile` is in for everyone, and every warp is done with tile - 1
    if (tile + 1 < tiles) load_tile(tile + 1);
    const __nv_bfloat16* kt = k_s + (tile % 2) * kKeys * kStride;
    const __nv_bfloat16* const* tile_rows = rows_s + tile * kKeys;

    // Scores of heads 16 m_tile .. + 15 and keys 32 half .. + 31: four 16 x 8 tiles.
    float s[4][4] = {};
#pragma unroll 4
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], kb0[4], kb1[4];
      load_matrices(qa, q_s + (m_tile * 16 + lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
      load_matrices(kb0, kt + (half * 32 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
      load_matrices(kb1, kt + (half * 32 + 16 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
      mma(s[0], qa, kb0[0], kb0[1]);
      mma(s[1], qa, kb0[2], kb0[3]);
      mma(s[2], qa, kb1[0], kb1[1]);
      mma(s[3], qa, kb1[2], kb1[3]);
    }
    float tile_max[2];
    scale_and_max(s, tile_rows + half * 32, quad, scale, tile_max);
    if (quad == 0) {
      max_s[half * kAllHeads + m_tile * 16 + g] = tile_max[0];
      max_s[half * kAllHeads + m_tile * 16 + g + 8] = tile_max[1];
    }
    __syncthreads();
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = m_tile * 16 + g + 8 * r;
      const float m = fmaxf(m_run[r], fmaxf(max_s[h], max_s[kAllHeads + h]));
      base[r] = m == -INFINITY ? 0.0f : m;  // no valid key yet: every p is 0
      alpha[r] = exp2f(m_run[r] - base[r]);
      m_run[r] = m;
    }
    float p_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int col = half * 32 + t * 8 + 2 * quad;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = exp2f(s[t][2 * r] - base[r]), p1 = exp2f(s[t][2 * r + 1] - base[r]);
        p_sum[r] += p0 + p1;
        *reinterpret_cast<__nv_bfloat162*>(p_s + (m_tile * 16 + g + 8 * r) * kPStride + col) = __floats2bfloat162_rn(p0, p1);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 1);
      p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 2);
    }
    if (quad == 0) {
      sum_s[half * kAllHeads + m_tile * 16 + g] = p_sum[0];
      sum_s[half * kAllHeads + m_tile * 16 + g + 8] = p_sum[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = m_tile * 16 + g + 8 * r;
      l_run[r] = l_run[r] * alpha[r] + (sum_s[h] + sum_s[kAllHeads + h]);
    }

    // P V (V = K) into dims half D / 2 .. + D / 2 - 1.
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
      load_matrices(pa, p_s + (m_tile * 16 + lane % 16) * kPStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int t = 0; t < kTiles; t += 2) {
        uint32_t vb[4];
        const int d0 = half * (D / 2) + t * 8;
        load_matrices_transposed(vb, kt + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kStride + d0 + (lane / 16) * 8);
        mma(acc[t], pa, vb[0], vb[1]);
        mma(acc[t + 1], pa, vb[2], vb[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = m_tile * 16 + g + 8 * r;
    if (h >= a.heads) continue;
    const int d0 = half * (D / 2) + 2 * quad;
    if (splits == 1) {  // the sink joins the denominator: softmax over [scores, sink]
      const float sink = a.sink[h] * kLog2e;
      const float m = fmaxf(m_run[r], sink);
      const float kept = exp2f(m_run[r] - m);
      const float factor = kept / (l_run[r] * kept + exp2f(sink - m));
      __nv_bfloat16* out = a.out + (row * a.heads + h) * D + d0;
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
        *reinterpret_cast<__nv_bfloat162*>(out + t * 8) = __floats2bfloat162_rn(acc[t][2 * r] * factor, acc[t][2 * r + 1] * factor);
    } else {
      const int64_t part = (static_cast<int64_t>(blockIdx.x) * max_splits + split) * a.heads + h;  // this launch's row
      float* out = a.workspace + part * D + d0;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) *reinterpret_cast<float2*>(out + t * 8) = make_float2(acc[t][2 * r], acc[t][2 * r + 1]);
      if (half == 0 && quad == 0) {
        float* stats = a.workspace + static_cast<int64_t>(gridDim.x) * max_splits * a.heads * D;
        stats[2 * part] = m_run[r];
        stats[2 * part + 1] = l_run[r];
      }
    }
  }
}

// The most keys and splits any row of the call can have: its window plus its picks (CSA) or
// its visible entries (HCA), at most max_entries when given, else all its block table holds.
int64_t max_keys_of(const SparseAttentionArgs& a) {
  int64_t compressed = 0;
  if (a.ratio > 0) {
    compressed = a.picks != nullptr ? a.num_picks : a.block_stride * (128 / a.ratio);
    if (a.picks == nullptr && a.max_entries > 0) compressed = min(compressed, a.max_entries);
  }
  return a.window + compressed;
}
int64_t max_splits_of(const SparseAttentionArgs& a) { return splits_of(max_keys_of(a)); }

// The split kernel: 33..64 heads, a split's keys within kMaxSplitKeys, and its shared memory
// within what the device grants a block.
bool uses_splits(const SparseAttentionArgs& a) {
  if (a.heads <= 32 || a.heads > kAllHeads || split_keys_of(max_keys_of(a)) > kMaxSplitKeys) return false;
  size_t shared = 0;
  switch (a.head_dim) {
    case 64: shared = split_shared_bytes<64>(); break;
    case 128: shared = split_shared_bytes<128>(); break;
    case 256: shared = split_shared_bytes<256>(); break;
    case 512: shared = split_shared_bytes<512>(); break;
    default: return false;
  }
  int device = 0, optin = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
         shared <= static_cast<size_t>(optin);
}

// Rows per launch of the split kernel: its partials within kWorkspaceBytes.
int64_t rows_per_launch(const SparseAttentionArgs& a) {
  const int64_t per_row = max_splits_of(a) * a.heads * (a.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  return max(int64_t{1}, min(a.num_seqs * a.len, static_cast<int64_t>(kWorkspaceBytes) / per_row));
}

template <int D>
cudaError_t launch(const SparseAttentionArgs& args, cudaStream_t stream) {
  const int64_t rows = args.num_seqs * args.len;
  if (D == 512 && args.head_split && sm90_heads_attention_supported(args)) return sm90_heads_attention(args, stream);  // no split, no merge
  if (uses_splits(args)) {
    const bool hopper = D == 512 && sm90_attention_supported(args);  // the same splits, on wgmma
    const int64_t max_splits = max_splits_of(args);
    const int64_t batch = max_splits == 1 || (hopper && sm90_attention_merges(max_splits)) ? rows : rows_per_launch(args);
    for (int64_t first = 0; first < rows; first += batch) {  // a row's result does not depend on its batch
      SparseAttentionArgs a = args;
      a.first_query = first;
      const unsigned n = static_cast<unsigned>(min(batch, rows - first));
      cudaError_t error = hopper ? sm90_split_attention(a, max_splits, n, stream)
                                 : launch_with_shared(split_attention_kernel<D>, dim3(n, static_cast<unsigned>(max_splits)), kSplitThreads,
                                                      split_shared_bytes<D>(), stream, a, max_splits);
      if (error != cudaSuccess) return error;
      if (max_splits == 1 || (hopper && sm90_attention_merges(max_splits))) continue;
      const auto combine = hopper ? combine_kernel<D, true> : combine_kernel<D, false>;
      combine<<<dim3(n, static_cast<unsigned>(a.heads)), D / 4, 0, stream>>>(a, max_splits);
      if ((error = cudaGetLastError()) != cudaSuccess) return error;
    }
    return cudaSuccess;
  }
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((args.heads + kHeads - 1) / kHeads));
  return launch_with_shared(sparse_attention_kernel<D>, grid, kThreads, shared_bytes<D>(), stream, args);
}

}  // namespace

size_t sparse_attention_workspace_bytes(const SparseAttentionArgs& a) {
  if (!uses_splits(a) || a.num_seqs * a.len == 0 || a.ratio < 0 || (a.ratio > 0 && 128 % a.ratio != 0)) return 0;
  const int64_t max_splits = max_splits_of(a);
  if (max_splits <= 1 || (a.head_dim == 512 && sm90_attention_supported(a) && sm90_attention_merges(max_splits))) return 0;
  return static_cast<size_t>(rows_per_launch(a) * max_splits * a.heads) * (a.head_dim + 2) * sizeof(float);
}

cudaError_t sparse_attention(const SparseAttentionArgs& a, cudaStream_t stream) {
  const bool paged = a.ratio > 0;
  if (a.q == nullptr || a.kv == nullptr || a.ring == nullptr || a.query_rows == nullptr || a.start == nullptr || a.slots == nullptr ||
      a.sink == nullptr || a.out == nullptr || a.heads < 1 || a.window < 1 || a.ratio < 0 || (paged && 128 % a.ratio != 0) ||
      (paged && (a.entries == nullptr || a.block_tables == nullptr)) || (a.picks != nullptr && a.num_picks < 1) || a.num_seqs < 0 ||
      a.len < 0 || a.num_seqs * a.len > 0x7fffffff || (a.num_seqs * a.len > 0 && a.q_rows < 1) || a.q_rows > 0x7fffffff ||
      a.heads > 65535 * kHeads || a.max_entries < 0 || (sparse_attention_workspace_bytes(a) > 0 && a.workspace == nullptr)) {
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
