#include "model/cuda/moe_fp4_gemm.h"

#include <algorithm>
#include <atomic>

#include "model/cuda/mma.cuh"
#include "model/cuda/moe_fp4_internal.cuh"

namespace deepinfer::model::cuda {
namespace {

using namespace moe_fp4_detail;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunkBytes = kTileRows * kSuper * 2;  // one superblock of a prefill tile's rows
constexpr int kMaxDim = 12288;
constexpr int64_t kMaxExperts = 1024;  // the sort keeps (32 + 1) E counters in shared memory

// Prefill and decode differ only in how many column tiles (NT) and m16 tiles (MW) a warp runs
// per weight fragment and how far ahead the weights are prefetched (PF superblocks).
template <bool kSmall>
struct Regime {
  static constexpr int MW = kSmall ? 1 : 2, NT = kSmall ? 1 : 8, PF = kSmall ? 4 : 2;
  static constexpr int kMinBlocks = kSmall ? 4 : 2;
};

struct GemmArgs {
  const uint64_t* packed;  // w13 (2 per expert) or w2 (1 per expert) device pointers
  const uint64_t* scale;
  const __nv_bfloat16* src;  // B rows: x (decode gate/up, gathered by token), gathered x (prefill gate/up) or act
  const int64_t* order;
  const float* routing_weights;
  const int4* tiles;  // (expert, first sorted row, rows, -)
  const int32_t* count;
  __nv_bfloat16* act;  // gate/up output [pairs, I], operand layout, times 2^64
  float* per_pair;     // down output [pairs, D] at row order[p]
  int64_t k;
  int K;  // reduction length: D (gate/up) or I (down)
  int F;  // output features per matrix: I (gate/up) or D (down)
  float limit;
};

struct Raw {
  uint4 lo, hi;  // 16 packed bytes of the fragment's rows g (lo) and g + 8 (hi)
  uint32_t lo_scale, hi_scale;
};

__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int w) { return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w; }

// Nibbles p and p + 4 (p in {0, 1}) of w as a bfloat16 pair of e2m1 value x 2^-126: the sign
// to bit 15, the magnitude bits to the exponent's two low bits and the mantissa's top bit (code
// 1 is the subnormal 2^-127). The masked nibbles times 2^(6 - 4p) + 2^(12 - 4p) are two copies
// that do not overlap (bits 6..9 and 12..15 of each half), so one multiply and two masks do it.
// Nibbles 2 and 3 are those of w >> 8.
template <int p>
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w) {
  constexpr uint32_t kNibbles = 0x000F000Fu << (4 * p), kCopies = (1u << (6 - 4 * p)) + (1u << (12 - 4 * p));
  return ((w & kNibbles) * kCopies) & 0x81C081C0u;
}

// bfloat16 2^(s - 1 - 64), twice: e2m1 x 2^-126 times this is the weight times 2^-64.
__device__ __forceinline__ uint32_t scale_pair(uint32_t s) {
  const uint32_t b = min(s + 62u, 255u) << 7;
  return b | (b << 16);
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// acc[m][j] += the superblock's 8 k16 steps: weights of fragment m (rows g, g + 8) times the
// column tile j held in shared memory at off + j tile_stride (this thread's token 8 j + g).
template <int MW, int NT>
__device__ __forceinline__ void multiply_superblock(float (&acc)[MW][NT][4], const Raw (&r)[MW], const uint8_t* smem, uint32_t off,
                                                    uint32_t tile_stride, int nt) {
  uint32_t f_lo[MW], f_hi[MW];
#pragma unroll
  for (int m = 0; m < MW; ++m) {
    f_lo[m] = scale_pair(r[m].lo_scale);
    f_hi[m] = scale_pair(r[m].hi_scale);
  }
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t a[MW][2][4];
#pragma unroll
    for (int m = 0; m < MW; ++m) {
      const uint32_t lo = word(r[m].lo, w), hi = word(r[m].hi, w), lo8 = lo >> 8, hi8 = hi >> 8;
      a[m][0][0] = mul_bf16x2(e2m1_pair<0>(lo), f_lo[m]);
      a[m][0][1] = mul_bf16x2(e2m1_pair<0>(hi), f_hi[m]);
      a[m][0][2] = mul_bf16x2(e2m1_pair<1>(lo), f_lo[m]);
      a[m][0][3] = mul_bf16x2(e2m1_pair<1>(hi), f_hi[m]);
      a[m][1][0] = mul_bf16x2(e2m1_pair<0>(lo8), f_lo[m]);
      a[m][1][1] = mul_bf16x2(e2m1_pair<0>(hi8), f_hi[m]);
      a[m][1][2] = mul_bf16x2(e2m1_pair<1>(lo8), f_lo[m]);
      a[m][1][3] = mul_bf16x2(e2m1_pair<1>(hi8), f_hi[m]);
    }
    const uint8_t* b_row = smem + (off ^ (w << 4));
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (j < nt) {
        const uint4 b = *reinterpret_cast<const uint4*>(b_row + j * tile_stride);
#pragma unroll
        for (int m = 0; m < MW; ++m) {
          mma(acc[m][j], a[m][0], b.x, b.y);
          mma(acc[m][j], a[m][1], b.z, b.w);
        }
      }
    }
  }
}

// Decode: the tile's rows (at most 8), the whole reduction length, into shared memory
// [8][K] in operand order, 128 / 2^ceil(log2 rows) threads per row. Rows past `rows` are left as
// they are: they feed only output columns that are never written.
template <bool kGateUp>
__device__ void stage_rows(const GemmArgs& a, uint8_t* smem, int row0, int rows) {
  const int shift = rows <= 1 ? 7 : rows <= 2 ? 6 : rows <= 4 ? 5 : 4;  // threads per row: 1 << shift
  const int n = threadIdx.x >> shift, lane = threadIdx.x & ((1 << shift) - 1), groups = a.K / 8, stride = 1 << shift;
  if (n >= rows) return;
  const int64_t src_row = kGateUp ? static_cast<uint32_t>(a.order[row0 + n]) / static_cast<uint32_t>(a.k) : static_cast<int64_t>(row0 + n);
  const uint4* src = reinterpret_cast<const uint4*>(a.src + src_row * a.K) + lane;
  // Group lane + stride i: superblock (lane >> 4) + (stride >> 4) i, the same slot in each.
  uint8_t* dst = smem + n * (a.K * 2) + (lane >> 4) * 256 + 16 * slot16(n, lane & 15);
  const int per_thread = lane < groups ? (groups - lane + stride - 1) >> shift : 0, sb_step = (stride >> 4) * 256;
  constexpr int kBatch = 8;
  for (int i0 = 0; i0 < per_thread; i0 += kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (i0 + q < per_thread) v[q] = __ldg(src + int64_t{i0 + q} * stride);
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (i0 + q < per_thread) *reinterpret_cast<uint4*>(dst + (i0 + q) * sb_step) = kGateUp ? to_operand(v[q]) : v[q];
  }
}

// Prefill: superblock sb of the tile's 64 rows (already in operand order) into buffer
// `buffer`, asynchronously; rows past `rows` zero-filled.
__device__ void stage_chunk(const GemmArgs& a, uint8_t* smem, int row0, int rows, int sb, int buffer) {
  const int G = threadIdx.x & 15, n0 = threadIdx.x >> 4;  // rows n0 + 8 q
  const __nv_bfloat16* first = a.src + int64_t{row0} * a.K + sb * kSuper + G * 8;
  uint8_t* dst = smem + buffer * kChunkBytes + n0 * 256 + 16 * slot16(n0, G);
#pragma unroll
  for (int q = 0; q < kTileRows * 16 / kThreads; ++q) {
    const int n = n0 + 8 * q;
    copy16_async(dst + q * 8 * 256, n < rows ? first + int64_t{n} * a.K : first, n < rows);
  }
}

__device__ __forceinline__ float swiglu(float gate_acc, float up_acc, float limit) {
  float gate = bf16_round(gate_acc), up = bf16_round(up_acc);
  if (limit > 0.0f) {
    gate = bf16_round(fminf(gate, limit));
    up = bf16_round(fminf(fmaxf(up, -limit), limit));
  }
  const float silu = bf16_round(gate / (1.0f + expf(-gate)));
  return bf16_round(silu * up);
}

// One block per (tile, slice of output features) at a time, persistent over the items. Warp w
// computes MW m16 fragments: gate/up, 8 features of w1 (rows g) and the same 8 of w3 (rows
// g + 8), so SwiGLU is local to a thread; down, 16 features of w2.
template <bool kGateUp, bool kSmall>
__global__ void __launch_bounds__(kThreads, Regime<kSmall>::kMinBlocks) expert_gemm_kernel(const GemmArgs a) {
  using R = Regime<kSmall>;
  constexpr int MW = R::MW, NT = R::NT, PF = R::PF;
  constexpr int kFeaturesPerM = kGateUp ? 8 : 16;
  constexpr int kBlockFeatures = kWarps * MW * kFeaturesPerM;
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int nsb = a.K / kSuper, feature_tiles = a.F / kBlockFeatures;
  const int64_t half_row = a.K / 2, scale_row = a.K / 32;
  const int items = *a.count * feature_tiles;
  // This thread's 16-byte unit of its token column (8 j + g) in a superblock row, swizzled.
  const uint32_t unit = 64 * t + 16 * ((t >> 1) ^ ((g & 1) << 1));
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int4 tile = a.tiles[item / feature_tiles];
    const int expert = tile.x, row0 = tile.y, rows = tile.z;
    const int f_warp = item % feature_tiles * kBlockFeatures + warp * MW * kFeaturesPerM;
    // Fragment m's rows: g (lo) and g + 8 (hi); gate/up: feature f of w1 and of w3; down: features f, f + 8 of w2.
    const int64_t f = f_warp + g;
    const int lo_matrix = kGateUp ? 2 * expert : expert, hi_matrix = kGateUp ? 2 * expert + 1 : expert;
    const uint8_t* lo = reinterpret_cast<const uint8_t*>(a.packed[lo_matrix]) + f * half_row + 16 * t;
    const uint8_t* hi = reinterpret_cast<const uint8_t*>(a.packed[hi_matrix]) + (kGateUp ? f : f + 8) * half_row + 16 * t;
    const uint8_t* lo_s = reinterpret_cast<const uint8_t*>(a.scale[lo_matrix]) + f * scale_row + t;
    const uint8_t* hi_s = reinterpret_cast<const uint8_t*>(a.scale[hi_matrix]) + (kGateUp ? f : f + 8) * scale_row + t;
    const auto load = [&](Raw(&r)[MW], int sb) {
#pragma unroll
      for (int m = 0; m < MW; ++m) {
        const int64_t rows_down = int64_t{m} * kFeaturesPerM;
        r[m].lo = load_weights(lo + rows_down * half_row + sb * 64);
        r[m].hi = load_weights(hi + rows_down * half_row + sb * 64);
        r[m].lo_scale = __ldg(lo_s + rows_down * scale_row + sb * 4);
        r[m].hi_scale = __ldg(hi_s + rows_down * scale_row + sb * 4);
      }
    };
    Raw ring[PF][MW];
#pragma unroll
    for (int s = 0; s < PF; ++s)
      if (s < nsb) load(ring[s], s);
    if constexpr (kSmall) {
      stage_rows<kGateUp>(a, smem, row0, rows);
      __syncthreads();
    } else {
      stage_chunk(a, smem, row0, rows, 0, 0);
      commit_copies();
    }
    const int nt = kSmall ? 1 : (rows + 7) / 8;
    float acc[MW][NT][4] = {};
    for (int sb0 = 0; sb0 < nsb; sb0 += PF) {
#pragma unroll
      for (int s = 0; s < PF; ++s) {
        const int sb = sb0 + s;
        if (sb < nsb) {
          uint32_t off = 0;
          if constexpr (kSmall) {
            off = g * (a.K * 2) + sb * 256 + unit;
          } else {
            wait_copies<0>();
            __syncthreads();  // superblock sb landed for every thread; everyone is done with buffer (sb + 1) & 1
            if (sb + 1 < nsb) {
              stage_chunk(a, smem, row0, rows, sb + 1, (sb + 1) & 1);
              commit_copies();
            }
            off = (sb & 1) * kChunkBytes + g * 256 + unit;
          }
          Raw cur[MW];
#pragma unroll
          for (int m = 0; m < MW; ++m) cur[m] = ring[s][m];
          if (sb + PF < nsb) load(ring[s], sb + PF);
          multiply_superblock<MW, NT>(acc, cur, smem, off, kSmall ? 0 : 8 * 256, nt);
        }
      }
    }
    // Epilogue: thread (g, t) holds columns 2 t, 2 t + 1 of each tile j, rows g and g + 8.
#pragma unroll
    for (int m = 0; m < MW; ++m) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j >= nt) continue;
        const int fm = f_warp + m * kFeaturesPerM + g;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 8 * j + 2 * t + e;
          if (r >= rows) continue;
          if constexpr (kGateUp) {
            const float v = swiglu(acc[m][j][e], acc[m][j][2 + e], a.limit);
            a.act[int64_t(row0 + r) * a.F + operand_column(fm)] = __float2bfloat16_rn(v * 0x1p64f);
          } else {
            const int64_t pair = a.order[row0 + r];
            const float w = a.routing_weights[pair];
            float* dst = a.per_pair + pair * a.F + fm;
            dst[0] = bf16_round(acc[m][j][e]) * w;
            dst[8] = bf16_round(acc[m][j][2 + e]) * w;
          }
        }
      }
    }
    __syncthreads();  // the next item overwrites the shared rows
  }
}

// The workspace's parts, each 256-byte aligned.
struct Workspace {
  int32_t* counts;  // decode tiles, prefill tiles, owned pairs
  int64_t* order;   // [pairs]: the owned pairs sorted by expert
  int4* small;
  int4* big;
  __nv_bfloat16* gathered;  // null when no prefill tile can exist
  __nv_bfloat16* act;
  float* per_pair;
  int64_t small_cap, big_cap;
  size_t bytes;
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

Workspace carve(const MoeFp4Args& a) {
  const int64_t pairs = a.tokens * a.k, E = a.num_experts;
  Workspace w{};
  w.small_cap = std::min(E, pairs);
  // A prefill tile's expert has more than 8 rows: at most pairs / 9 of them, each with one
  // short tile beyond pairs / 64 full ones.
  w.big_cap = (pairs + kTileRows - 1) / kTileRows + std::min(E, pairs / (kSmallRows + 1));
  auto* base = static_cast<uint8_t*>(a.workspace);
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    uint8_t* p = base == nullptr ? nullptr : base + at;
    at += align256(bytes);
    return p;
  };
  w.counts = reinterpret_cast<int32_t*>(take(4 * sizeof(int32_t)));
  w.order = reinterpret_cast<int64_t*>(take(pairs * sizeof(int64_t)));
  w.small = reinterpret_cast<int4*>(take(std::max<int64_t>(w.small_cap, 1) * sizeof(int4)));
  w.big = reinterpret_cast<int4*>(take(std::max<int64_t>(w.big_cap, 1) * sizeof(int4)));
  w.gathered = pairs > kSmallRows ? reinterpret_cast<__nv_bfloat16*>(take(pairs * a.hidden * 2)) : nullptr;
  w.act = reinterpret_cast<__nv_bfloat16*>(take(pairs * a.intermediate * 2));
  w.per_pair = reinterpret_cast<float*>(take(pairs * a.hidden * 4));
  w.bytes = at;
  return w;
}

// Blocks of expert_gemm_kernel<kGateUp, kSmall> resident per SM with `shared` bytes of shared
// memory, cached per device and shared size.
template <bool kGateUp, bool kSmall>
cudaError_t resident_blocks(size_t shared, int device, int& blocks) {
  constexpr int kDevices = 64;
  static std::atomic<int64_t> cache[kDevices];  // shared << 16 | blocks
  const bool cached = device >= 0 && device < kDevices;
  if (cached) {
    const int64_t entry = cache[device].load(std::memory_order_relaxed);
    if (entry != 0 && static_cast<size_t>(entry >> 16) == shared) {
      blocks = static_cast<int>(entry & 0xFFFF);
      return cudaSuccess;
    }
  }
  const auto kernel = expert_gemm_kernel<kGateUp, kSmall>;
  cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  if (error == cudaSuccess) error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, shared);
  if (error != cudaSuccess) return error;
  blocks = std::min(std::max(blocks, 1), 0xFFFF);
  if (cached) cache[device].store(static_cast<int64_t>(shared) << 16 | blocks, std::memory_order_relaxed);
  return cudaSuccess;
}

// A persistent launch of expert_gemm_kernel over at most `max_tiles` tiles.
template <bool kGateUp, bool kSmall>
cudaError_t launch_gemm(const GemmArgs& g, int64_t max_tiles, int device, int sms, cudaStream_t stream) {
  constexpr int MW = Regime<kSmall>::MW;
  const int64_t feature_tiles = g.F / (kWarps * MW * (kGateUp ? 8 : 16));
  const size_t shared = kSmall ? size_t{kSmallRows} * g.K * 2 : size_t{2} * kChunkBytes;
  int per_sm = 0;
  const cudaError_t error = resident_blocks<kGateUp, kSmall>(shared, device, per_sm);
  if (error != cudaSuccess) return error;
  const int64_t blocks = std::min<int64_t>(max_tiles * feature_tiles, int64_t{sms} * per_sm);
  if (blocks <= 0) return cudaSuccess;
  return launch_with_shared(expert_gemm_kernel<kGateUp, kSmall>, dim3(static_cast<unsigned>(blocks)), kThreads, shared, stream, g);
}

}  // namespace

bool moe_fp4_shape_supported(int64_t hidden, int64_t intermediate, int64_t experts) {
  return hidden >= kSuper && intermediate >= kSuper && hidden % kSuper == 0 && intermediate % kSuper == 0 && hidden <= kMaxDim &&
         intermediate <= kMaxDim && experts >= 1 && experts <= kMaxExperts;
}

size_t moe_fp4_workspace_bytes(const MoeFp4Args& args) {
  MoeFp4Args sizing = args;
  sizing.workspace = nullptr;
  return carve(sizing).bytes;
}

cudaError_t moe_fp4(const MoeFp4Args& a, cudaStream_t stream) {
  const int64_t pairs = a.tokens * a.k;
  if (!moe_fp4_shape_supported(a.hidden, a.intermediate, a.num_experts) || a.tokens < 0 || a.k < 1 || pairs >= (int64_t{1} << 31))
    return cudaErrorInvalidValue;
  if (a.tokens == 0) return cudaSuccess;
  if (a.w13_packed == nullptr || a.w13_scale == nullptr || a.w2_packed == nullptr || a.w2_scale == nullptr || a.x == nullptr ||
      a.experts == nullptr || a.routing_weights == nullptr || a.workspace == nullptr || a.out == nullptr)
    return cudaErrorInvalidValue;
  int device = 0, sms = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  const Workspace w = carve(a);
  const int D = static_cast<int>(a.hidden), I = static_cast<int>(a.intermediate);
  if ((error = launch_route(a.experts, pairs, a.first_expert, static_cast<int>(a.num_experts), w.order, w.small, w.big, w.counts,
                            stream)) != cudaSuccess)
    return error;
  const bool prefill = pairs > kSmallRows;  // else every expert has at most 8 rows
  if (prefill && (error = launch_gather(a.x, w.order, a.k, w.big, w.counts + 1, w.big_cap, D, w.gathered, sms, stream)) != cudaSuccess)
    return error;
  GemmArgs up{a.w13_packed, a.w13_scale, a.x, w.order, a.routing_weights, w.small, w.counts, w.act, w.per_pair, a.k, D, I, a.swiglu_limit};
  if ((error = launch_gemm<true, true>(up, w.small_cap, device, sms, stream)) != cudaSuccess) return error;
  if (prefill) {
    up.src = w.gathered;
    up.tiles = w.big;
    up.count = w.counts + 1;
    if ((error = launch_gemm<true, false>(up, w.big_cap, device, sms, stream)) != cudaSuccess) return error;
  }
  GemmArgs down{a.w2_packed, a.w2_scale, w.act, w.order, a.routing_weights, w.small, w.counts, w.act, w.per_pair, a.k, I, D, 0.0f};
  if ((error = launch_gemm<false, true>(down, w.small_cap, device, sms, stream)) != cudaSuccess) return error;
  if (prefill) {
    down.tiles = w.big;
    down.count = w.counts + 1;
    if ((error = launch_gemm<false, false>(down, w.big_cap, device, sms, stream)) != cudaSuccess) return error;
  }
  return launch_combine(w.per_pair, a.experts, a.tokens, static_cast<int>(a.k), a.first_expert, a.first_expert + a.num_experts, D, a.out,
                        a.per_slot, sms, stream);
}

}  // namespace deepinfer::model::cuda
