// The routing stages of the FP4 expert path (moe_fp4_internal.cuh): the pairs sorted by expert
// and cut into tiles, the gather of the prefill rows and the fixed-order sum over each token's
// slots.
#include <algorithm>

#include "model/cuda/mma.cuh"
#include "model/cuda/moe_fp4_internal.cuh"
#include "model/cuda/sm90_bulk.cuh"

namespace deepinfer::model::cuda::moe_fp4_detail {
namespace {

constexpr int kRouteWarps = 32;
constexpr int kRouteThreads = 32 * kRouteWarps;

// Exclusive prefix of v over the block's threads (in thread order); *total: the sum. Every
// thread calls it; scratch holds kRouteWarps ints.
__device__ int block_exclusive_scan(int v, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = scratch[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    scratch[lane] = w;
  }
  __syncthreads();
  const int before = (warp > 0 ? scratch[warp - 1] : 0) + x - v;
  *total = scratch[kRouteWarps - 1];
  __syncthreads();  // scratch free again
  return before;
}

constexpr int kRouteBatch = 8;  // chunks of 32 keys a warp loads at once

// One block: a stable counting sort of the owned pairs by expert and the tile lists. Warp w
// owns a contiguous segment of the pairs (whole chunks of 32) and counts its rows per expert
// in its own shared counters (lanes of one expert found with __match_any_sync; no atomics);
// the counters become each warp's offset inside each expert, the experts' starts are a scan,
// and a second walk places pair i at start[e] + offset[w][e] + its rank among the earlier
// pairs of its chunk. So the pairs of an expert stay in pair order. Both walks load
// kRouteBatch chunks' keys before using any (one load latency per batch, not per chunk).
// Shared memory: (kRouteWarps + 1) E ints.
__global__ void __launch_bounds__(kRouteThreads) route_kernel(const int64_t* experts, int64_t pairs, int64_t first, int num_experts,
                                                              int64_t* order, int4* small, int4* big, int64_t big_cap, int32_t* counts) {
  extern __shared__ int route_shared[];
  __shared__ int scratch[kRouteWarps];
  const int E = num_experts, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int* const warp_rows = route_shared;                       // [kRouteWarps][E]: rows, then offsets inside the expert
  int* const expert_start = route_shared + kRouteWarps * E;  // [E]
  int* const mine = warp_rows + warp * E;
  const int64_t seg = ((pairs + kRouteWarps - 1) / kRouteWarps + 31) / 32 * 32;
  const int64_t begin = warp * seg, end = min(pairs, begin + seg);
  const auto key_of = [&](int64_t i) {
    if (i >= end) return -1;
    const int64_t id = experts[i] - first;
    return id >= 0 && id < E ? static_cast<int>(id) : -1;
  };
  const auto load_batch = [&](int64_t c0, int(&keys)[kRouteBatch]) {
#pragma unroll
    for (int q = 0; q < kRouteBatch; ++q) keys[q] = key_of(c0 + 32 * q + lane);
  };
  for (int i = threadIdx.x; i < kRouteWarps * E; i += kRouteThreads) warp_rows[i] = 0;
  __syncthreads();
  for (int64_t c0 = begin; c0 < end; c0 += 32 * kRouteBatch) {
    int keys[kRouteBatch];
    load_batch(c0, keys);
#pragma unroll
    for (int q = 0; q < kRouteBatch; ++q) {
      const unsigned peers = __match_any_sync(0xffffffffu, keys[q]);
      if (keys[q] >= 0 && lane == __ffs(peers) - 1) mine[keys[q]] += __popc(peers);
      __syncwarp();
    }
  }
  __syncthreads();
  int start_base = 0, small_base = 0, image_base = 0, big_base[kWidths] = {};
  for (int e0 = 0; e0 < E; e0 += kRouteThreads) {
    const int e = e0 + threadIdx.x;
    int rows = 0;
    if (e < E) {
      for (int w = 0; w < kRouteWarps; ++w) {
        const int n = warp_rows[w * E + e];
        warp_rows[w * E + e] = rows;
        rows += n;
      }
    }
    // Image rows: a decode tile's own rows, a prefill tile's rounded up to kImageStep.
    const int image = rows <= kSmallRows ? rows : rows / kTileRows * kTileRows + big_image_rows(rows % kTileRows);
    int total = 0, small_total = 0, image_total = 0;
    const int start = start_base + block_exclusive_scan(rows, scratch, &total);
    const int image_at = image_base + block_exclusive_scan(image, scratch, &image_total);
    const int n_small = rows >= 1 && rows <= kSmallRows ? 1 : 0;
    const int small_at = small_base + block_exclusive_scan(n_small, scratch, &small_total);
    if (e < E) expert_start[e] = start;
    if (n_small) small[small_at] = make_int4(e, start, rows, image_at);
    // Prefill tiles by image width: the full ones (128 rows) in class kWidths - 1, a shorter last one in its own.
    const int last = rows > kSmallRows && rows % kTileRows != 0 ? big_image_rows(rows % kTileRows) / kImageStep - 1 : -1;
#pragma unroll
    for (int c = 0; c < kWidths; ++c) {
      const int n = (c == kWidths - 1 ? (rows > kSmallRows ? rows / kTileRows : 0) : 0) + (last == c ? 1 : 0);
      int class_total = 0;
      const int at = big_base[c] + block_exclusive_scan(n, scratch, &class_total);
      for (int q = 0; q < n; ++q) {
        const int first_row = c == kWidths - 1 && q < rows / kTileRows ? q * kTileRows : rows / kTileRows * kTileRows;
        big[c * big_cap + at + q] = make_int4(e, start + first_row, min(kTileRows, rows - first_row), image_at + first_row);
      }
      big_base[c] += class_total;
    }
    image_base += image_total;
    start_base += total;
    small_base += small_total;
  }
  __syncthreads();
  for (int64_t c0 = begin; c0 < end; c0 += 32 * kRouteBatch) {
    int keys[kRouteBatch];
    load_batch(c0, keys);
#pragma unroll
    for (int q = 0; q < kRouteBatch; ++q) {
      const int key = keys[q];
      const unsigned peers = __match_any_sync(0xffffffffu, key);
      if (key >= 0) order[expert_start[key] + mine[key] + __popc(peers & ((1u << lane) - 1u))] = c0 + 32 * q + lane;
      __syncwarp();
      if (key >= 0 && lane == __ffs(peers) - 1) mine[key] += __popc(peers);
      __syncwarp();
    }
  }
  if (threadIdx.x == 0) {
    counts[0] = small_base;
    int prefill_tiles = 0;
    for (int c = 0; c < kWidths; ++c) {
      counts[4 + c] = big_base[c];
      prefill_tiles += big_base[c];
    }
    counts[1] = prefill_tiles;
    counts[2] = start_base;
  }
}

// Four bfloat16 values times w, each product rounded to float32 on its own.
__device__ __forceinline__ float4 weighted(uint2 v, float w) {
  return make_float4(__fmul_rn(__uint_as_float(v.x << 16), w), __fmul_rn(__uint_as_float(v.x & 0xFFFF0000u), w),
                     __fmul_rn(__uint_as_float(v.y << 16), w), __fmul_rn(__uint_as_float(v.y & 0xFFFF0000u), w));
}

// The prefill tiles' x images (moe_fp4_internal.cuh): one warp per tile row, built in this warp's
// share of shared memory (one lane per (superblock, group column) unit of four 16-byte loads, laid
// out as store_group_column does, with 16 bytes after each 128-byte panel row so that a quarter
// warp's stores hit distinct banks), then written out 16 bytes a lane in whole panel rows.
__global__ void gather_kernel(const __nv_bfloat16* x, const int64_t* order, int64_t k, const int4* big, int64_t big_cap,
                              const int32_t* counts, int dim, uint8_t* images) {
  extern __shared__ uint4 gather_rows[];  // [warps][dim / 64 panels][9 chunks]
  const int lane = threadIdx.x & 31, panels = dim / 64;
  uint4* const row_chunks = gather_rows + (threadIdx.x / 32) * panels * 9;
  int begin[kWidths + 1] = {0};
  for (int c = 0; c < kWidths; ++c) begin[c + 1] = begin[c] + counts[4 + c];
  const int64_t slots = int64_t{begin[kWidths]} * kTileRows, warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t i = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; i < slots; i += warps) {
    const int index = static_cast<int>(i / kTileRows);
    int c = 0;
    while (index >= begin[c + 1]) ++c;
    const int4 tile = big[c * big_cap + index - begin[c]];
    const int r = static_cast<int>(i % kTileRows);
    if (r >= tile.z) continue;
    const __nv_bfloat16* src = x + order[tile.y + r] / k * dim;
    for (int u = lane; u < dim / 32; u += 32) {
      const int sb = u >> 2, w = u & 3;
      const uint4* group = reinterpret_cast<const uint4*>(src + sb * kSuper) + w;
      uint4 v[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = to_operand(__ldg(group + 4 * t));
      uint4* panel = row_chunks + (2 * sb + (w >> 1)) * 9;
      const int first = 4 * (w & 1);
      panel[(first + 0) ^ (r & 7)] = make_uint4(v[0].x, v[1].x, v[2].x, v[3].x);
      panel[(first + 1) ^ (r & 7)] = make_uint4(v[0].y, v[1].y, v[2].y, v[3].y);
      panel[(first + 2) ^ (r & 7)] = make_uint4(v[0].z, v[1].z, v[2].z, v[3].z);
      panel[(first + 3) ^ (r & 7)] = make_uint4(v[0].w, v[1].w, v[2].w, v[3].w);
    }
    __syncwarp();
    const uint32_t panel_bytes = big_image_rows(tile.z) * 128u;
    uint8_t* row = images + int64_t{tile.w} * dim * 2 + r * 128;
    for (int chunk = lane; chunk < panels * 8; chunk += 32)
      *reinterpret_cast<uint4*>(row + (chunk >> 3) * panel_bytes + (chunk & 7) * 16) = row_chunks[(chunk >> 3) * 9 + (chunk & 7)];
    __syncwarp();  // the next row reuses the chunks
  }
}

// sum += v, lane by lane.
__device__ __forceinline__ void add_to(float4& sum, float4 v) {
  sum.x += v.x;
  sum.y += v.y;
  sum.z += v.z;
  sum.w += v.w;
}

// Up to this k, combine_kernel issues every load of a quad (the k expert ids and weights before it
// waits for down, then the k rows) before it uses any: one round trip to memory after down instead of
// two a slot, which is most of the kernel's time at batch 1.
constexpr int kCombineSlots = 8;

// out[t] = the sum of its k pairs' outputs times their routing weights in slot order, those of
// experts outside [first, last) left out. The products are rounded before the sum (no fused
// multiply-add), as the reference computes them. Every pair's row exists in per_pair (unwritten
// for pairs of other experts), so it is read before its expert is known and dropped after.
__global__ void combine_kernel(const __nv_bfloat16* per_pair, const int64_t* experts, const float* weights, int64_t tokens, int k,
                               int64_t first, int64_t last, int dim, float* out) {
  sm90::allow_next_grid();
  const int quads = dim / 4;
  const int64_t total = tokens * quads, stride = int64_t{gridDim.x} * blockDim.x;
  const auto* rows = reinterpret_cast<const uint2*>(per_pair);
  bool waited = false;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t token = i / quads, q = i % quads;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k <= kCombineSlots) {
      int64_t id[kCombineSlots];
      float w[kCombineSlots];
      uint2 v[kCombineSlots];
#pragma unroll
      for (int s = 0; s < kCombineSlots; ++s) {
        if (s >= k) break;
        const int64_t pair = token * k + s;
        id[s] = experts[pair];
        w[s] = weights[pair];
      }
      if (!waited) sm90::wait_for_previous_grid(), waited = true;  // the rows are down's
#pragma unroll
      for (int s = 0; s < kCombineSlots; ++s) {
        if (s >= k) break;
        v[s] = rows[(token * k + s) * quads + q];
      }
#pragma unroll
      for (int s = 0; s < kCombineSlots; ++s) {
        if (s >= k) break;
        if (id[s] >= first && id[s] < last) add_to(sum, weighted(v[s], w[s]));
      }
    } else {
      if (!waited) sm90::wait_for_previous_grid(), waited = true;
      for (int s = 0; s < k; ++s) {
        const int64_t pair = token * k + s, id = experts[pair];
        if (id >= first && id < last) add_to(sum, weighted(rows[pair * quads + q], weights[pair]));
      }
    }
    reinterpret_cast<float4*>(out)[i] = sum;
  }
  if (!waited) sm90::wait_for_previous_grid();  // so this grid never ends before the one it follows
}

// out[t, s] = pair (t, s)'s output times its routing weight, 0 for experts outside [first, last)
// (MoeFp4Args::per_slot).
__global__ void slots_kernel(const __nv_bfloat16* per_pair, const int64_t* experts, const float* weights, int64_t pairs, int64_t first,
                             int64_t last, int dim, float* out) {
  sm90::wait_for_previous_grid();
  const int quads = dim / 4;
  const int64_t total = pairs * quads, stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t pair = i / quads, id = experts[pair];
    reinterpret_cast<float4*>(out)[i] = id < first || id >= last ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                                                                 : weighted(reinterpret_cast<const uint2*>(per_pair)[i], weights[pair]);
  }
}

}  // namespace

size_t route_shared_bytes(int num_experts) { return size_t{kRouteWarps + 1} * num_experts * sizeof(int); }

cudaError_t launch_route(const int64_t* experts, int64_t pairs, int64_t first, int num_experts, int64_t* order, int4* small, int4* big,
                         int64_t big_cap, int32_t* counts, cudaStream_t stream) {
  return launch_with_shared(route_kernel, dim3(1), kRouteThreads, route_shared_bytes(num_experts), stream, experts, pairs, first,
                            num_experts, order, small, big, big_cap, counts);
}

cudaError_t launch_gather(const __nv_bfloat16* x, const int64_t* order, int64_t k, const int4* big, int64_t big_cap, const int32_t* counts,
                          int dim, uint8_t* images, int sms, cudaStream_t stream) {
  const size_t per_warp = static_cast<size_t>(dim / 64) * 9 * sizeof(uint4);
  const int warps = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, 96 * 1024 / per_warp)));
  const int per_sm = static_cast<int>(std::max<size_t>(1, 220 * 1024 / (per_warp * warps)));  // blocks resident by shared memory
  const int64_t blocks = std::min<int64_t>(int64_t{sms} * per_sm, (big_cap * kTileRows + warps - 1) / warps);
  if (blocks <= 0) return cudaSuccess;
  return launch_with_shared(gather_kernel, dim3(static_cast<unsigned>(blocks)), 32 * warps, per_warp * warps, stream, x, order, k, big,
                            big_cap, counts, dim, images);
}

cudaError_t launch_combine(const __nv_bfloat16* per_pair, const int64_t* experts, const float* weights, int64_t tokens, int k,
                           int64_t first, int64_t last, int dim, float* out, bool per_slot, int sms, cudaStream_t stream) {
  const int64_t rows = per_slot ? tokens * k : tokens;
  const int64_t blocks = std::min<int64_t>(int64_t{sms} * 8, (rows * dim / 4 + 255) / 256);
  if (blocks <= 0) return cudaSuccess;
  if (per_slot)
    return launch_dependent(slots_kernel, dim3(static_cast<unsigned>(blocks)), 256, 0, stream, per_pair, experts, weights, rows, first,
                            last, dim, out);
  return launch_dependent(combine_kernel, dim3(static_cast<unsigned>(blocks)), 256, 0, stream, per_pair, experts, weights, tokens, k, first,
                          last, dim, out);
}

}  // namespace deepinfer::model::cuda::moe_fp4_detail
