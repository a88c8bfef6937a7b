// The bfloat16 batch-invariant GEMM of dense_gemm.h: one mma.sync kernel template, instantiated
// for a few tile shapes that differ only in how many tokens and features a block and a warp take,
// how deep the shared-memory pipeline is and how many k values a stage holds, and on Hopper the
// wgmma tiles of dense_gemm_sm90.cu. Every one feeds each output element the same k16 steps in the
// same order, value k of a step in the MMA's k slot k (dense_gemm.h), so which one runs (a host
// choice from M, N, K and the device) never changes a bit.
//
// The reduction is cut into dense_gemm_bf16_splits(N, K) ranges of whole units (blockIdx.y); with
// more than one, every range's float32 sum goes to the workspace and sum_splits adds them in
// range order. Groups (blockIdx.z) are independent GEMMs of one shape at fixed element offsets.
// Shared memory: dense_gemm_internal.cuh's swizzled [unit][row][64 B] stages, x's tile then W's;
// the fragments come from them by ldmatrix.
#include "model/cuda/dense_gemm.h"
#include "model/cuda/dense_gemm_internal.cuh"

#include <algorithm>
#include <atomic>
#include <initializer_list>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int64_t kMaxRows = (int64_t{1} << 31) - 257;  // M and N: tile origins and ends stay in int
#ifndef DEEPINFER_GEMM_MIN_SPLIT_UNITS                  // tests/gpu/gemm_micro.sh builds variants with other values
#define DEEPINFER_GEMM_MIN_SPLIT_UNITS 16
#endif
#ifndef DEEPINFER_GEMM_SPLIT_TARGET
#define DEEPINFER_GEMM_SPLIT_TARGET 256
#endif
#ifndef DEEPINFER_GEMM_WGMMA_MIN_ROWS
#define DEEPINFER_GEMM_WGMMA_MIN_ROWS 32
#endif
constexpr int kMaxSplits = 8;                                     // reduction ranges, at most
constexpr int kMinSplitUnits = DEEPINFER_GEMM_MIN_SPLIT_UNITS;    // units a range holds, at least (512 values)
constexpr int kSplitTarget = DEEPINFER_GEMM_SPLIT_TARGET;         // 64-feature blocks a one-token call should have
constexpr int64_t kWgmmaMinRows = DEEPINFER_GEMM_WGMMA_MIN_ROWS;  // M from which Hopper runs the wgmma tiles
constexpr int64_t kMaxGroups = 65535;                             // gridDim.z

using Params = GemmParams;

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

// Stage units [unit0, min(unit0 + kUnits, end)) of x's and W's tile rows.
template <class T>
__device__ __forceinline__ void load_stage(const Params& p, const __nv_bfloat16* x, const __nv_bfloat16* w, uint8_t* stage, int tok0,
                                           int f0, int unit0, int end) {
  const int valid = min(T::kUnits, end - unit0);
  copy_rows<T::kThreads, T::kTokens, T::kUnits>(stage, x, p.ldx, tok0, p.m, unit0, valid);
  copy_rows<T::kThreads, T::kFeatures, T::kUnits>(stage + T::kChunksX * 16, w, p.ldw, f0, p.n, unit0, valid);
}

// acc[i][j] += the stage's first `valid` units: per unit, k16 step 0 (values 0..15 of the unit)
// of every tile, then step 1 (16..31), value k of a step in the MMA's k slot k. ldmatrix gives
// lane (g, t) x's tokens warp_tok + 16 i + g (+ 8) and W's features warp_feat + 8 j + g, values
// 2 t, 2 t + 1 and 2 t + 8, 2 t + 9 of the step.
template <class T>
__device__ __forceinline__ void multiply_stage(float (&acc)[T::kMW][T::kNT][4], const uint8_t* stage, int valid, int warp_tok,
                                               int warp_feat, int lane) {
#pragma unroll
  for (int u = 0; u < T::kUnits; ++u) {
    if (u < valid) {
      const uint8_t* xs = stage + u * T::kTokens * kUnitBytes;
      const uint8_t* ws = stage + T::kChunksX * 16 + u * T::kFeatures * kUnitBytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t a[T::kMW][4], b[T::kNT][2];
#pragma unroll
        for (int i = 0; i < T::kMW; ++i) load_matrices(a[i], xs + swizzle64(warp_tok + 16 * i + lane % 16, 2 * h + lane / 16));
#pragma unroll
        for (int j = 0; j < T::kNT; j += 2) {
          uint32_t r[4];
          load_matrices(r, ws + swizzle64(warp_feat + 8 * j + lane % 8 + (lane / 16) * 8, 2 * h + (lane / 8) % 2));
          b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
        }
#pragma unroll
        for (int j = 0; j < T::kNT; ++j) {
#pragma unroll
          for (int i = 0; i < T::kMW; ++i) mma(acc[i][j], a[i], b[j][0], b[j][1]);
        }
      }
    }
  }
}

__device__ __forceinline__ void store_two(__nv_bfloat16* dst, float v0, float v1) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
}
__device__ __forceinline__ void store_two(float* dst, float v0, float v1) { *reinterpret_cast<float2*>(dst) = make_float2(v0, v1); }

// Thread (g, t) holds, per tile (i, j), tokens 16 i + g (c0, c1) and + 8 (c2, c3), features
// 8 j + 2 t and + 1, from (tok, feat) on.
template <class T, class Out>
__device__ __forceinline__ void store_tile(const Params& p, Out* y, int64_t ldy, bool paired, const float (&acc)[T::kMW][T::kNT][4],
                                           int tok, int feat, int g, int t) {
#pragma unroll
  for (int i = 0; i < T::kMW; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = tok + 16 * i + g + 8 * half;
      if (row >= p.m) continue;
#pragma unroll
      for (int j = 0; j < T::kNT; ++j) {
        const int f = feat + 8 * j + 2 * t;
        Out* dst = y + static_cast<int64_t>(row) * ldy + f;
        const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
        if (paired && f + 1 < p.n) {
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
  extern __shared__ __align__(1024) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  int token_block = 0, feature_block = 0;
  tile_coords(p, static_cast<int>(blockIdx.x), token_block, feature_block);
  const int tok0 = token_block * T::kTokens, f0 = feature_block * T::kFeatures;
  const int warp_tok = warp / T::kWarpsF * (T::kMW * 16), warp_feat = warp % T::kWarpsF * (T::kNT * 8);
  const BlockRange range = block_range(p);
  const int stages = (range.end - range.begin + T::kUnits - 1) / T::kUnits;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < stages) load_stage<T>(p, range.x, range.w, smem + s * T::kStageBytes, tok0, f0, range.begin + s * T::kUnits, range.end);
    commit_copies();
  }
  float acc[T::kMW][T::kNT][4] = {};
  for (int s = 0; s < stages; ++s) {
    wait_copies<T::kStages - 2>();
    __syncthreads();  // stage s landed for every thread; every warp is done with stage s - 1's buffer
    const int next = s + T::kStages - 1;
    if (next < stages)
      load_stage<T>(p, range.x, range.w, smem + next % T::kStages * T::kStageBytes, tok0, f0, range.begin + next * T::kUnits, range.end);
    commit_copies();
    multiply_stage<T>(acc, smem + s % T::kStages * T::kStageBytes, min(T::kUnits, range.end - range.begin - s * T::kUnits), warp_tok,
                      warp_feat, lane);
  }
  if (p.splits == 1) {
    store_tile<T, Out>(p, block_output<Out>(p), p.ldy, p.paired, acc, tok0 + warp_tok, f0 + warp_feat, g, t);
  } else {
    store_tile<T, float>(p, block_partial(p), p.n, p.n % 2 == 0, acc, tok0 + warp_tok, f0 + warp_feat, g, t);
  }
}

// y = ((p_0 + p_1) + p_2) + ... over the ranges' float32 sums, rounded once; grid (blocks, groups).
template <class Out>
__global__ void __launch_bounds__(256) sum_splits(const Params p) {
  const int64_t elements = static_cast<int64_t>(p.m) * p.n, group = blockIdx.y;
  const float* partial = p.partial + group * p.splits * elements;
  Out* y = static_cast<Out*>(p.y) + group * p.gy;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements; e += int64_t{gridDim.x} * blockDim.x) {
    float v = partial[e];
    for (int s = 1; s < p.splits; ++s) v += partial[s * elements + e];
    store_one(y + e / p.n * p.ldy + e % p.n, v);
  }
}

// ---- host side: validation, the tile choice, launches ----

enum class Plan { kD1Wide, kD1Narrow, kD4Wide, kD4Narrow, kP256, kP128, kP64, kW64, kW128, kW192, kW256, kW128Ranges };

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
    case Plan::kW64: return {"wgmma 64x128", 64, 128, 1, 4, 2, 1.0};
    case Plan::kW128: return {"wgmma 128x128", 128, 128, 1, 4, 2, 1.0};
    case Plan::kW192: return {"wgmma 192x128", 192, 128, 1, 4, 2, 1.0};
    case Plan::kW256: return {"wgmma 256x128", 256, 128, 1, 4, 2, 1.0};
    case Plan::kW128Ranges: return {"wgmma 128x128 ranges in block", 128, 128, 1, 4, 2, 1.0};
  }
  return info<P256>("prefill 128x256", 0.85);
}

// A rough time of a configuration, the longest of: its tensor work (waves of blocks sharing a
// multiprocessor's mma.sync rate); the chain of K / 16 dependent MMAs every block runs; its
// operands into each multiprocessor (at most kSmBytes, and no faster than the bytes its resident
// blocks keep in flight allow); all blocks' operands through L2; W and x from HBM once. Tuning
// constants, not measurements (docs/kernel-notes.md); the choice never changes a bit.
double estimate_seconds(const PlanInfo& info, int64_t m, int64_t n, int64_t k, int splits, int sms) {
  constexpr double kSmFlops = 5.0e12;                                               // one m16n8k16 per ~1.6 clocks at 1.98 GHz
  constexpr double kStep = 17e-9;                                                   // one dependent MMA
  constexpr double kSmBytes = 120e9;                                                // L2 into one multiprocessor
  constexpr double kL2Bytes = 7.0e12;                                               // L2 into all of them
  constexpr double kHbmBytes = 3.9e12;                                              // 90% of 4.3 TB/s
  constexpr double kLatency = 1.2e-6;                                               // a loaded round trip to memory
  const double K = static_cast<double>((k / kUnit + splits - 1) / splits * kUnit);  // one range's values
  const int64_t blocks = (m + info.tokens - 1) / info.tokens * ((n + info.features - 1) / info.features) * splits;
  const int64_t slots = int64_t{sms} * info.blocks_per_sm, waves = (blocks + slots - 1) / slots;
  const int64_t per_sm = (blocks + sms - 1) / sms, resident = std::min<int64_t>(info.blocks_per_sm, per_sm);
  const double rows = static_cast<double>(std::min<int64_t>(info.tokens, m) + info.features);  // x rows past M are not read
  const double block_bytes = rows * 2.0 * K, in_flight = rows * 64.0 * info.units * (info.stages - 1);
  const double compute = static_cast<double>(waves * resident) * 2.0 * info.tokens * info.features * K / (kSmFlops * info.efficiency);
  const double chain = static_cast<double>(waves) * K / 16.0 * kStep;
  const double per_sm_rate = std::min(kSmBytes, static_cast<double>(resident) * in_flight / kLatency);
  const double stream = static_cast<double>(per_sm) * block_bytes / per_sm_rate;
  const double through_l2 = static_cast<double>(blocks) * block_bytes / kL2Bytes;
  const double from_hbm = 2.0 * static_cast<double>(n + m) * K * splits / kHbmBytes;
  return std::max({compute, chain, stream, through_l2, from_hbm});
}

// From kWgmmaMinRows rows on Hopper, the wgmma tiles: the ranges walked in one block where the
// tiles alone fill the multiprocessors twice, else a block per range with the fewest tokens a
// block that takes them all (or 256); below, the mma.sync configuration with the lowest estimate,
// of equal ones the first in decode-to-prefill order.
Plan choose(int64_t m, int64_t n, int64_t k, int64_t groups, int sms, bool wgmma) {
  const int splits = dense_gemm_bf16_splits(n, k, groups);
  if (wgmma && m >= kWgmmaMinRows) {
    const int64_t tiles = (m + 127) / 128 * ((n + 127) / 128) * groups;  // of 128 x 128, without the split
    if (splits > 1 && tiles >= 2 * int64_t{sms} && (k / kUnit + splits - 1) / splits % 2 == 0) return Plan::kW128Ranges;
    return m <= 64 ? Plan::kW64 : m <= 128 ? Plan::kW128 : m <= 192 ? Plan::kW192 : Plan::kW256;
  }
  Plan best = Plan::kD1Wide;
  double best_seconds = estimate_seconds(plan_info(best), m, n, k, splits, sms);
  for (Plan candidate : {Plan::kD1Narrow, Plan::kD4Wide, Plan::kD4Narrow, Plan::kP64, Plan::kP128, Plan::kP256}) {
    const double seconds = estimate_seconds(plan_info(candidate), m, n, k, splits, sms);
    if (seconds < best_seconds) best = candidate, best_seconds = seconds;
  }
  return best;
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

bool valid(const DenseGemmBf16Args& a) {
  if (!dense_gemm_bf16_shape_supported(a.n, a.k) || a.m < 0 || a.m > kMaxRows) return false;
  if (a.m == 0) return true;
  const size_t out = a.out_float32 ? 4 : 2;
  if (a.groups < 1 || a.groups > kMaxGroups || a.gx < 0 || a.gw < 0 || a.gy < 0 || a.gx % 8 != 0 || a.gw % 8 != 0) return false;
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
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.splits), static_cast<unsigned>(p.gz));
  kernel<<<grid, T::kThreads, T::kShared, stream>>>(p);
  return cudaGetLastError();
}

template <class Out>
cudaError_t launch_tiles(Plan plan, const Params& p, int device, cudaStream_t stream) {
  switch (plan) {
    case Plan::kW64: return dense_gemm_wgmma_launch(64, false, p, sizeof(Out) == 4, device, stream);
    case Plan::kW128: return dense_gemm_wgmma_launch(128, false, p, sizeof(Out) == 4, device, stream);
    case Plan::kW192: return dense_gemm_wgmma_launch(192, false, p, sizeof(Out) == 4, device, stream);
    case Plan::kW256: return dense_gemm_wgmma_launch(256, false, p, sizeof(Out) == 4, device, stream);
    case Plan::kW128Ranges: return dense_gemm_wgmma_launch(128, true, p, sizeof(Out) == 4, device, stream);
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

// The tile kernel, then (more than one range) the ranges' sums added in order.
template <class Out>
cudaError_t launch_plan(Plan plan, const Params& p, int device, cudaStream_t stream) {
  const cudaError_t error = launch_tiles<Out>(plan, p, device, stream);
  if (error != cudaSuccess || p.splits == 1 || plan == Plan::kW128Ranges) return error;
  const int64_t elements = int64_t{p.m} * p.n;
  const unsigned sum_blocks = static_cast<unsigned>(std::min<int64_t>((elements + 255) / 256, 4096));
  sum_splits<Out><<<dim3(sum_blocks, static_cast<unsigned>(p.gz)), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

// dense_gemm_internal.cuh: the current device, its multiprocessor count and compute capability,
// cached per device (sms + 1 << 20 when it is 9.0).
cudaError_t dense_gemm_device(int& device, int& sms, bool& wgmma) {
  constexpr int kDevices = 64, kHopper = 1 << 20;
  static std::atomic<int> cache[kDevices];
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  int entry = device >= 0 && device < kDevices ? cache[device].load(std::memory_order_relaxed) : 0;
  if (entry == 0) {
    int major = 0, minor = 0;
    error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (error != cudaSuccess) return error;
    entry = sms + (major == 9 && minor == 0 ? kHopper : 0);
    if (device >= 0 && device < kDevices) cache[device].store(entry, std::memory_order_relaxed);
  }
  sms = entry % kHopper;
  wgmma = entry >= kHopper;
  return cudaSuccess;
}

cudaError_t dense_gemm_device(int& device, int& sms) {
  bool wgmma = false;
  return dense_gemm_device(device, sms, wgmma);
}

int dense_gemm_bf16_splits(int64_t n, int64_t k, int64_t groups) {
  const int64_t units = k / kUnit, feature_blocks = (n + 63) / 64 * std::max<int64_t>(groups, 1);
  int splits = 1;
  while (splits < kMaxSplits && feature_blocks * splits < kSplitTarget && units / (2 * splits) >= kMinSplitUnits) splits *= 2;
  return splits;
}

int64_t dense_gemm_bf16_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t groups) {
  const int splits = dense_gemm_bf16_splits(n, k, groups);
  if (splits == 1 || m <= 0) return 0;
  int device = 0, sms = 0;
  bool wgmma = false;
  if (dense_gemm_device(device, sms, wgmma) == cudaSuccess && choose(m, n, k, groups, sms, wgmma) == Plan::kW128Ranges) return 0;
  return groups * splits * m * n * static_cast<int64_t>(sizeof(float));
}

bool dense_gemm_bf16_shape_supported(int64_t n, int64_t k) {
  return n >= 1 && n <= kMaxRows && k >= kUnit && k % kUnit == 0 && k < (int64_t{1} << 31);
}

const char* dense_gemm_bf16_plan(int64_t m, int64_t n, int64_t k, int sms, bool wgmma) {
  return plan_info(choose(m, n, k, 1, std::max(sms, 1), wgmma)).name;
}

cudaError_t dense_gemm_bf16(const DenseGemmBf16Args& a, cudaStream_t stream) {
  if (!valid(a)) return cudaErrorInvalidValue;
  if (a.m == 0) return cudaSuccess;
  int device = 0, sms = 0;
  bool wgmma = false;
  if (const cudaError_t error = dense_gemm_device(device, sms, wgmma); error != cudaSuccess) return error;
  const size_t out = a.out_float32 ? 4 : 2;
  Params p{};
  p.x = a.x, p.w = a.w, p.y = a.y, p.partial = a.workspace;
  p.ldx = a.ldx, p.ldw = a.ldw, p.ldy = a.ldy, p.gx = a.gx, p.gw = a.gw, p.gy = a.gy;
  p.m = static_cast<int>(a.m), p.n = static_cast<int>(a.n), p.units = static_cast<int>(a.k / kUnit);
  p.splits = dense_gemm_bf16_splits(a.n, a.k, a.groups);
  p.split_units = (p.units + p.splits - 1) / p.splits;
  p.gz = static_cast<int>(a.groups);
  p.paired = aligned(a.y, 2 * out) && a.ldy % 2 == 0 && a.gy % 2 == 0;
  const Plan plan = choose(a.m, a.n, a.k, a.groups, sms, wgmma);
  if (p.splits > 1 && plan != Plan::kW128Ranges && (a.workspace == nullptr || !aligned(a.workspace, 8))) return cudaErrorInvalidValue;
  return a.out_float32 ? launch_plan<float>(plan, p, device, stream) : launch_plan<__nv_bfloat16>(plan, p, device, stream);
}

}  // namespace deepinfer::model::cuda
