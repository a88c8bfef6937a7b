// The bfloat16 batch-invariant GEMM of dense_gemm.h: one kernel template, instantiated for a few
// tile shapes that differ only in how many tokens and features a block and a warp take, how deep
// the shared-memory pipeline is and how many k values a stage holds. Every instantiation feeds
// each output element the same k16 steps in the same order (dense_gemm.h), so which one runs (a
// host choice from M, N, K and the device's multiprocessor count) never changes a bit.
//
// Shared memory, one stage: [unit][token row][64 B] for x, then [unit][feature row][64 B] for W,
// filled by 16-byte cp.async (a row's unit is four 16-byte chunks, chunk t = quad thread t's
// values 32 u + 8 t .. + 7). A quarter warp's 16-byte fragment loads read two whole adjacent rows
// of one unit: 128 contiguous bytes, no bank conflicts without a swizzle.
#include "model/cuda/dense_gemm.h"
#include "model/cuda/dense_gemm_internal.cuh"

#include <algorithm>
#include <atomic>
#include <initializer_list>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kUnit = 32;                               // reduction values per unit: two k16 steps
constexpr int kUnitBytes = 64;                          // one row's unit in bfloat16
constexpr int kGroup = 8;                               // token blocks walked before the next feature block (L2 reuse)
constexpr int64_t kMaxRows = (int64_t{1} << 31) - 257;  // M and N: tile origins and ends stay in int

// kWarpsT x kWarpsF warps, each computing kMW m16 token tiles x kNT n8 feature tiles;
// kStages stages of kUnits units; kMinBlocks blocks per multiprocessor (register budget).
template <int WarpsT, int WarpsF, int MW, int NT, int Stages, int Units, int MinBlocks>
struct Tile {
  static constexpr int kWarpsF = WarpsF, kMW = MW, kNT = NT, kStages = Stages, kUnits = Units;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr int kThreads = 32 * WarpsT * WarpsF;
  static constexpr int kTokens = WarpsT * MW * 16, kFeatures = WarpsF * NT * 8;
  static constexpr int kChunksX = kTokens * Units * 4, kChunksW = kFeatures * Units * 4;  // 16-byte copies per stage
  static constexpr int kStageBytes = (kChunksX + kChunksW) * 16;
  static constexpr int kShared = Stages * kStageBytes;
  static_assert((kTokens & (kTokens - 1)) == 0 && (kFeatures & (kFeatures - 1)) == 0, "rows per stage must be powers of two");
  static_assert(Stages >= 2 && kShared <= 227 * 1024, "the stages must fit in shared memory");
};

// Decode: one m16 token tile (M <= 16) or four (M <= 64), 64 features a block (4 warps) or 16 (1 warp).
using D1Wide = Tile<1, 4, 1, 2, 5, 4, 2>;    // 16 x 64, 100 KB
using D1Narrow = Tile<1, 1, 1, 2, 8, 4, 3>;  // 16 x 16, 64 KB
using D4Wide = Tile<1, 4, 4, 2, 4, 4, 1>;    // 64 x 64, 128 KB
using D4Narrow = Tile<1, 1, 4, 2, 4, 4, 2>;  // 64 x 16, 80 KB
// Prefill: warps of 64 tokens x 64 features (P64: 32 x 64).
using P256 = Tile<2, 4, 4, 8, 3, 2, 1>;  // 128 x 256, 144 KB
using P128 = Tile<2, 2, 4, 8, 3, 2, 2>;  // 128 x 128, 96 KB
using P64 = Tile<2, 2, 2, 8, 4, 2, 2>;   // 64 x 128, 96 KB

struct Params {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  void* y;
  int64_t ldx, ldw, ldy;
  int m, n, units;  // units: K / 32
  int token_blocks, feature_blocks;
  bool paired;  // y and ldy allow two-element stores
};

// Block `bid`'s token and feature block: groups of kGroup token blocks, token block fastest.
__device__ __forceinline__ void tile_coords(const Params& p, int bid, int& token_block, int& feature_block) {
  const int per_group = kGroup * p.feature_blocks, group = bid / per_group, first = group * kGroup;
  const int size = min(p.token_blocks - first, kGroup), in_group = bid - group * per_group;
  token_block = first + in_group % size;
  feature_block = in_group / size;
}

// One operand's rows [row0, row0 + kRows) x units [unit0, unit0 + valid) into `dst`
// ([unit][row][64 B]); rows at or past `rows` are not copied (they feed only outputs never stored).
template <int kThreads, int kRows, int kUnits>
__device__ __forceinline__ void copy_rows(uint8_t* dst, const __nv_bfloat16* src, int64_t ld, int row0, int rows, int unit0, int valid) {
  constexpr int kChunks = kRows * kUnits * 4;
#pragma unroll
  for (int r = 0; r < (kChunks + kThreads - 1) / kThreads; ++r) {
    const int c = static_cast<int>(threadIdx.x) + r * kThreads;
    const int part = c & 3, row = (c >> 2) % kRows, u = (c >> 2) / kRows;
    if (c < kChunks && u < valid && row0 + row < rows)
      copy16_async(dst + 16 * c, src + static_cast<int64_t>(row0 + row) * ld + (unit0 + u) * kUnit + part * 8, true);
  }
}

template <class T>
__device__ __forceinline__ void load_stage(const Params& p, uint8_t* stage, int tok0, int f0, int unit0) {
  const int valid = min(T::kUnits, p.units - unit0);
  copy_rows<T::kThreads, T::kTokens, T::kUnits>(stage, p.x, p.ldx, tok0, p.m, unit0, valid);
  copy_rows<T::kThreads, T::kFeatures, T::kUnits>(stage + T::kChunksX * 16, p.w, p.ldw, f0, p.n, unit0, valid);
}

// acc[i][j] += the stage's first `valid` units: per unit, step 0 (values 8 t + 0..3 of the unit)
// of every tile, then step 1 (8 t + 4..7). Thread (g, t) reads tokens warp_tok + 16 i + g (+ 8)
// and features warp_feat + 8 j + g, its chunk t of each.
template <class T>
__device__ __forceinline__ void multiply_stage(float (&acc)[T::kMW][T::kNT][4], const uint8_t* stage, int valid, int warp_tok,
                                               int warp_feat, int g, int t) {
#pragma unroll
  for (int u = 0; u < T::kUnits; ++u) {
    if (u < valid) {
      const uint8_t* xs = stage + (u * T::kTokens + warp_tok + g) * kUnitBytes + 16 * t;
      const uint8_t* ws = stage + T::kChunksX * 16 + (u * T::kFeatures + warp_feat + g) * kUnitBytes + 16 * t;
      uint4 lo[T::kMW], hi[T::kMW], b[T::kNT];
#pragma unroll
      for (int i = 0; i < T::kMW; ++i) {
        lo[i] = *reinterpret_cast<const uint4*>(xs + 16 * i * kUnitBytes);
        hi[i] = *reinterpret_cast<const uint4*>(xs + (16 * i + 8) * kUnitBytes);
      }
#pragma unroll
      for (int j = 0; j < T::kNT; ++j) b[j] = *reinterpret_cast<const uint4*>(ws + 8 * j * kUnitBytes);
#pragma unroll
      for (int j = 0; j < T::kNT; ++j) {
#pragma unroll
        for (int i = 0; i < T::kMW; ++i) {
          const uint32_t a[4] = {lo[i].x, hi[i].x, lo[i].y, hi[i].y};
          mma(acc[i][j], a, b[j].x, b[j].y);
        }
      }
#pragma unroll
      for (int j = 0; j < T::kNT; ++j) {
#pragma unroll
        for (int i = 0; i < T::kMW; ++i) {
          const uint32_t a[4] = {lo[i].z, hi[i].z, lo[i].w, hi[i].w};
          mma(acc[i][j], a, b[j].z, b[j].w);
        }
      }
    }
  }
}

__device__ __forceinline__ void store_one(__nv_bfloat16* dst, float v) { *dst = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_one(float* dst, float v) { *dst = v; }
__device__ __forceinline__ void store_two(__nv_bfloat16* dst, float v0, float v1) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
}
__device__ __forceinline__ void store_two(float* dst, float v0, float v1) { *reinterpret_cast<float2*>(dst) = make_float2(v0, v1); }

// Thread (g, t) holds, per tile (i, j), tokens 16 i + g (c0, c1) and + 8 (c2, c3), features
// 8 j + 2 t and + 1, from (tok, feat) on.
template <class T, class Out>
__device__ __forceinline__ void store_tile(const Params& p, const float (&acc)[T::kMW][T::kNT][4], int tok, int feat, int g, int t) {
  Out* y = static_cast<Out*>(p.y);
#pragma unroll
  for (int i = 0; i < T::kMW; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = tok + 16 * i + g + 8 * half;
      if (row >= p.m) continue;
#pragma unroll
      for (int j = 0; j < T::kNT; ++j) {
        const int f = feat + 8 * j + 2 * t;
        Out* dst = y + static_cast<int64_t>(row) * p.ldy + f;
        const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
        if (p.paired && f + 1 < p.n) {
          store_two(dst, v0, v1);
        } else {
          if (f < p.n) store_one(dst, v0);
          if (f + 1 < p.n) store_one(dst + 1, v1);
        }
      }
    }
  }
}

template <class T, class Out>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) dense_gemm_kernel(const Params p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  int token_block = 0, feature_block = 0;
  tile_coords(p, static_cast<int>(blockIdx.x), token_block, feature_block);
  const int tok0 = token_block * T::kTokens, f0 = feature_block * T::kFeatures;
  const int warp_tok = warp / T::kWarpsF * (T::kMW * 16), warp_feat = warp % T::kWarpsF * (T::kNT * 8);
  const int stages = (p.units + T::kUnits - 1) / T::kUnits;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < stages) load_stage<T>(p, smem + s * T::kStageBytes, tok0, f0, s * T::kUnits);
    commit_copies();
  }
  float acc[T::kMW][T::kNT][4] = {};
  for (int s = 0; s < stages; ++s) {
    wait_copies<T::kStages - 2>();
    __syncthreads();  // stage s landed for every thread; every warp is done with stage s - 1's buffer
    const int next = s + T::kStages - 1;
    if (next < stages) load_stage<T>(p, smem + next % T::kStages * T::kStageBytes, tok0, f0, next * T::kUnits);
    commit_copies();
    multiply_stage<T>(acc, smem + s % T::kStages * T::kStageBytes, min(T::kUnits, p.units - s * T::kUnits), warp_tok, warp_feat, g, t);
  }
  store_tile<T, Out>(p, acc, tok0 + warp_tok, f0 + warp_feat, g, t);
}

// ---- host side: validation, the tile choice, launches ----

enum class Plan { kD1Wide, kD1Narrow, kD4Wide, kD4Narrow, kP256, kP128, kP64 };

struct PlanInfo {
  const char* name;
  int tokens, features, blocks_per_sm, stages, units;
  double efficiency;  // guessed share of a multiprocessor's mma.sync rate at full occupancy
};

template <class T>
constexpr PlanInfo info(const char* name, double efficiency) {
  return {name, T::kTokens, T::kFeatures, T::kMinBlocks, T::kStages, T::kUnits, efficiency};
}

PlanInfo plan_info(Plan plan) {
  switch (plan) {
    case Plan::kD1Wide: return info<D1Wide>("decode 16x64", 0.3);
    case Plan::kD1Narrow: return info<D1Narrow>("decode 16x16", 0.25);
    case Plan::kD4Wide: return info<D4Wide>("decode 64x64", 0.5);
    case Plan::kD4Narrow: return info<D4Narrow>("decode 64x16", 0.4);
    case Plan::kP256: return info<P256>("prefill 128x256", 0.85);
    case Plan::kP128: return info<P128>("prefill 128x128", 0.8);
    case Plan::kP64: return info<P64>("prefill 64x128", 0.7);
  }
  return info<P256>("prefill 128x256", 0.85);
}

// A rough time of a configuration, the longest of: its tensor work (waves of blocks sharing a
// multiprocessor's mma.sync rate); the chain of K / 16 dependent MMAs every block runs; its
// operands into each multiprocessor (at most kSmBytes, and no faster than the bytes its resident
// blocks keep in flight allow); all blocks' operands through L2; W and x from HBM once. Tuning
// constants, not measurements (docs/kernel-notes.md); the choice never changes a bit.
double estimate_seconds(const PlanInfo& info, int64_t m, int64_t n, int64_t k, int sms) {
  constexpr double kSmFlops = 5.0e12;   // one m16n8k16 per ~1.6 clocks at 1.98 GHz
  constexpr double kStep = 17e-9;       // one dependent MMA
  constexpr double kSmBytes = 120e9;    // L2 into one multiprocessor
  constexpr double kL2Bytes = 7.0e12;   // L2 into all of them
  constexpr double kHbmBytes = 3.9e12;  // 90% of 4.3 TB/s
  constexpr double kLatency = 1.2e-6;   // a loaded round trip to memory
  const double K = static_cast<double>(k);
  const int64_t blocks = (m + info.tokens - 1) / info.tokens * ((n + info.features - 1) / info.features);
  const int64_t slots = int64_t{sms} * info.blocks_per_sm, waves = (blocks + slots - 1) / slots;
  const int64_t per_sm = (blocks + sms - 1) / sms, resident = std::min<int64_t>(info.blocks_per_sm, per_sm);
  const double rows = static_cast<double>(std::min<int64_t>(info.tokens, m) + info.features);  // x rows past M are not read
  const double block_bytes = rows * 2.0 * K, in_flight = rows * 64.0 * info.units * (info.stages - 1);
  const double compute = static_cast<double>(waves * resident) * 2.0 * info.tokens * info.features * K / (kSmFlops * info.efficiency);
  const double chain = static_cast<double>(waves) * K / 16.0 * kStep;
  const double per_sm_rate = std::min(kSmBytes, static_cast<double>(resident) * in_flight / kLatency);
  const double stream = static_cast<double>(per_sm) * block_bytes / per_sm_rate;
  const double through_l2 = static_cast<double>(blocks) * block_bytes / kL2Bytes;
  const double from_hbm = 2.0 * static_cast<double>(n + m) * K / kHbmBytes;
  return std::max({compute, chain, stream, through_l2, from_hbm});
}

// The configuration with the lowest estimate; of equal ones the first in decode-to-prefill order.
Plan choose(int64_t m, int64_t n, int64_t k, int sms) {
  Plan best = Plan::kD1Wide;
  double best_seconds = estimate_seconds(plan_info(best), m, n, k, sms);
  for (Plan candidate : {Plan::kD1Narrow, Plan::kD4Wide, Plan::kD4Narrow, Plan::kP64, Plan::kP128, Plan::kP256}) {
    const double seconds = estimate_seconds(plan_info(candidate), m, n, k, sms);
    if (seconds < best_seconds) best = candidate, best_seconds = seconds;
  }
  return best;
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

bool valid(const DenseGemmBf16Args& a) {
  if (!dense_gemm_bf16_shape_supported(a.n, a.k) || a.m < 0 || a.m > kMaxRows) return false;
  if (a.m == 0) return true;
  const size_t out = a.out_float32 ? 4 : 2;
  return a.x != nullptr && a.w != nullptr && a.y != nullptr && aligned(a.x, 16) && aligned(a.w, 16) && aligned(a.y, out) && a.ldx >= a.k &&
         a.ldw >= a.k && a.ldx % 8 == 0 && a.ldw % 8 == 0 && a.ldy >= a.n;
}

// Launches tile T with output Out; the kernel's shared-memory limit is raised once per device.
template <class T, class Out>
cudaError_t launch(Params p, int device, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};  // bit d: done on device d
  const auto kernel = dense_gemm_kernel<T, Out>;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (configured.load(std::memory_order_relaxed) & bit) == 0) {
    const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kShared);
    if (error != cudaSuccess) return error;
    configured.fetch_or(bit, std::memory_order_relaxed);
  }
  p.token_blocks = (p.m + T::kTokens - 1) / T::kTokens;
  p.feature_blocks = (p.n + T::kFeatures - 1) / T::kFeatures;
  const int64_t blocks = int64_t{p.token_blocks} * p.feature_blocks;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), T::kThreads, T::kShared, stream>>>(p);
  return cudaGetLastError();
}

template <class Out>
cudaError_t launch_plan(Plan plan, const Params& p, int device, cudaStream_t stream) {
  switch (plan) {
    case Plan::kD1Wide: return launch<D1Wide, Out>(p, device, stream);
    case Plan::kD1Narrow: return launch<D1Narrow, Out>(p, device, stream);
    case Plan::kD4Wide: return launch<D4Wide, Out>(p, device, stream);
    case Plan::kD4Narrow: return launch<D4Narrow, Out>(p, device, stream);
    case Plan::kP256: return launch<P256, Out>(p, device, stream);
    case Plan::kP128: return launch<P128, Out>(p, device, stream);
    case Plan::kP64: return launch<P64, Out>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

// dense_gemm_internal.cuh: the current device and its multiprocessor count, cached per device.
cudaError_t dense_gemm_device(int& device, int& sms) {
  constexpr int kDevices = 64;
  static std::atomic<int> cache[kDevices];
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  if (device >= 0 && device < kDevices && (sms = cache[device].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
  error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error == cudaSuccess && device >= 0 && device < kDevices) cache[device].store(sms, std::memory_order_relaxed);
  return error;
}

bool dense_gemm_bf16_shape_supported(int64_t n, int64_t k) {
  return n >= 1 && n <= kMaxRows && k >= kUnit && k % kUnit == 0 && k < (int64_t{1} << 31);
}

const char* dense_gemm_bf16_plan(int64_t m, int64_t n, int64_t k, int sms) { return plan_info(choose(m, n, k, std::max(sms, 1))).name; }

cudaError_t dense_gemm_bf16(const DenseGemmBf16Args& a, cudaStream_t stream) {
  if (!valid(a)) return cudaErrorInvalidValue;
  if (a.m == 0) return cudaSuccess;
  int device = 0, sms = 0;
  if (const cudaError_t error = dense_gemm_device(device, sms); error != cudaSuccess) return error;
  const size_t out = a.out_float32 ? 4 : 2;
  Params p{a.x,
           a.w,
           a.y,
           a.ldx,
           a.ldw,
           a.ldy,
           static_cast<int>(a.m),
           static_cast<int>(a.n),
           static_cast<int>(a.k / kUnit),
           0,
           0,
           aligned(a.y, 2 * out) && a.ldy % 2 == 0};
  const Plan plan = choose(a.m, a.n, a.k, sms);
  return a.out_float32 ? launch_plan<float>(plan, p, device, stream) : launch_plan<__nv_bfloat16>(plan, p, device, stream);
}

}  // namespace deepinfer::model::cuda
