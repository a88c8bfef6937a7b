// The batch-invariant GEMM's Hopper tiles (dense_gemm.h; sm_90a): two warpgroups, each 64 features
// x T tokens (T = 64, 128, 192 or 256) of wgmma m64nTk16 with both operands K-major in shared
// memory, W as the A operand and x as B. The operands, the stages and their 64-byte swizzle are the mma.sync
// kernel's (dense_gemm_internal.cuh), and so are the k16 steps: every element takes, per unit, the
// step over values 0..15 then the one over 16..31, value k of a step in the MMA's k slot k, into one
// float32 accumulator per reduction range; so a row's bits are the same whichever kernel ran it.
//
// Reduction ranges: one block per range (blockIdx.y, the sums to the workspace), or, `in_block`,
// one block walks all ranges of its tile in order, p_0 into a running float32 sum and each later
// p_s added to it at the range's end (((p_0 + p_1) + ...), as sum_splits adds them): no workspace
// traffic, for large M where the grid has blocks enough without the split.
//
// Pipeline: all 256 threads copy a stage with cp.async two stages ahead of the one multiplied; a
// stage's wgmmas are committed as a group and waited for one stage later, and the barrier at the
// top of each stage makes the buffer being refilled free (its wgmmas, two stages back, done).
#include "model/cuda/dense_gemm_internal.cuh"
#include "model/cuda/wgmma.cuh"
#include "model/cuda/wgmma_ss.cuh"

#include <atomic>

namespace deepinfer::model::cuda {
namespace {

constexpr int kFeatures = 128, kThreads = 256, kStages = 4, kUnits = 2;  // wgmma_step's calls below assume two units a stage

template <int T>
struct WTile {
  static constexpr int kChunksX = T * kUnits * 4, kChunksW = kFeatures * kUnits * 4;
  static constexpr int kStageBytes = (kChunksX + kChunksW) * 16;
  static constexpr int kShared = kStages * kStageBytes;
  static_assert(kShared <= 227 * 1024, "the stages must fit in shared memory");
};

// A K-major operand of 64-byte rows in 8-row atoms of 512 bytes (the 64-byte swizzle).
__device__ __forceinline__ uint64_t descriptor64(const uint8_t* p) {
  return static_cast<uint64_t>((shared_address(p) & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{512 >> 4} << 32) | (uint64_t{2} << 62);
}

template <int T>
__device__ __forceinline__ void wgmma_step(float* d, uint64_t a, uint64_t b) {
  if constexpr (T == 256) {
    wgmma_m64n256k16_ss_k(d, a, b);
  } else if constexpr (T == 192) {
    wgmma_m64n192k16_ss_k(d, a, b);
  } else if constexpr (T == 128) {
    wgmma_m64n128k16_ss_k(d, a, b);
  } else {
    static_assert(T == 64, "token tiles of 64, 128, 192 or 256");
    wgmma_m64n64k16_ss_k(d, a, b);
  }
}

template <int T, class Out, bool InBlock>
__global__ void __launch_bounds__(kThreads, 1) dense_gemm_wgmma(const GemmParams p) {
  using W = WTile<T>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wg = warp / 4;
  int token_block = 0, feature_block = 0;
  tile_coords(p, static_cast<int>(blockIdx.x), token_block, feature_block);
  const int tok0 = token_block * T, f0 = feature_block * kFeatures;
  BlockRange range = block_range(p);
  if constexpr (InBlock) range.begin = 0, range.end = p.units;  // every range, in order
  const int stages = (range.end - range.begin + kUnits - 1) / kUnits;
  const int stages_per_range = p.split_units / kUnits;  // InBlock: split_units is a multiple of kUnits
  auto load = [&](int s) {
    uint8_t* stage = smem + s % kStages * W::kStageBytes;
    const int unit0 = range.begin + s * kUnits, valid = min(kUnits, range.end - unit0);
    copy_rows<kThreads, T, kUnits>(stage, range.x, p.ldx, tok0, p.m, unit0, valid);
    copy_rows<kThreads, kFeatures, kUnits>(stage + W::kChunksX * 16, range.w, p.ldw, f0, p.n, unit0, valid);
  };
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    if (s < stages) load(s);
    commit_copies();
  }
  float acc[T / 2], run[InBlock ? T / 2 : 1];
#pragma unroll
  for (int i = 0; i < T / 2; ++i) acc[i] = 0.0f;
  // InBlock: the finished range's sum into run (its first: run = p_0) and acc back to 0.
  auto end_range = [&](bool first) {
    wgmma_wait<0>();
    wgmma_settle(acc);
#pragma unroll
    for (int i = 0; i < T / 2; ++i) {
      if constexpr (InBlock) run[i] = first ? acc[i] : run[i] + acc[i];
      acc[i] = 0.0f;
    }
  };
  for (int s = 0; s < stages; ++s) {
    if (InBlock && s > 0 && s % stages_per_range == 0) end_range(s == stages_per_range);
    wait_copies<kStages - 3>();
    fence_async_shared();
    __syncthreads();  // stage s landed for every thread; every warpgroup's wgmmas of stage s - 2 are done
    if (s + kStages - 2 < stages) load(s + kStages - 2);
    commit_copies();
    const uint8_t* stage = smem + s % kStages * W::kStageBytes;
    const int valid = min(kUnits, range.end - range.begin - s * kUnits);
    const uint64_t x_desc = descriptor64(stage), w_desc = descriptor64(stage + W::kChunksX * 16 + 64 * wg * kUnitBytes);
    constexpr uint64_t kStep = 32 >> 4, kUnitX = T * kUnitBytes >> 4, kUnitW = kFeatures * kUnitBytes >> 4;  // descriptor units
    wgmma_fence();
    wgmma_step<T>(acc, w_desc, x_desc);
    wgmma_step<T>(acc, w_desc + kStep, x_desc + kStep);
    if (valid == kUnits) {  // the range's last stage may hold one unit
      wgmma_step<T>(acc, w_desc + kUnitW, x_desc + kUnitX);
      wgmma_step<T>(acc, w_desc + kUnitW + kStep, x_desc + kUnitX + kStep);
    }
    wgmma_commit();
    wgmma_wait<1>();
    wgmma_settle(acc);
  }
  wgmma_wait<0>();
  wgmma_settle(acc);
  if constexpr (InBlock) {
    if (stages > stages_per_range) {  // more than one range: the last one's sum added too
#pragma unroll
      for (int i = 0; i < T / 2; ++i) acc[i] = run[i] + acc[i];
    }
  }
  // d[4 j + e]: feature 16 (warp % 4) + lane / 4 (+ 8 for e >= 2), token 8 j + 2 (lane % 4) + e % 2.
  const int feature = f0 + 64 * wg + 16 * (warp % 4) + lane / 4;
  const bool whole = InBlock || p.splits == 1;
  Out* y = block_output<Out>(p);
  float* partial = block_partial(p);
#pragma unroll
  for (int j = 0; j < T / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int f = feature + 8 * (e >> 1), tok = tok0 + 8 * j + 2 * (lane % 4) + (e & 1);
      if (f >= p.n || tok >= p.m) continue;
      if (whole) {
        store_one(y + static_cast<int64_t>(tok) * p.ldy + f, acc[4 * j + e]);
      } else {
        store_one(partial + static_cast<int64_t>(tok) * p.n + f, acc[4 * j + e]);
      }
    }
  }
}

template <int T, class Out, bool InBlock = false>
cudaError_t launch(const GemmParams& p, int device, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};  // bit d: the shared-memory limit raised on device d
  const auto kernel = dense_gemm_wgmma<T, Out, InBlock>;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (configured.load(std::memory_order_relaxed) & bit) == 0) {
    const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, WTile<T>::kShared);
    if (error != cudaSuccess) return error;
    configured.fetch_or(bit, std::memory_order_relaxed);
  }
  const int64_t blocks = int64_t{p.token_blocks} * p.feature_blocks;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  const unsigned ranges = InBlock ? 1 : static_cast<unsigned>(p.splits);
  kernel<<<dim3(static_cast<unsigned>(blocks), ranges, static_cast<unsigned>(p.gz)), kThreads, WTile<T>::kShared, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool dense_gemm_wgmma_in_block(const GemmParams& p) { return p.split_units % kUnits == 0; }

cudaError_t dense_gemm_wgmma_launch(int tokens, bool in_block, GemmParams p, bool out_float32, int device, cudaStream_t stream) {
  p.token_blocks = (p.m + tokens - 1) / tokens;
  p.feature_blocks = (p.n + kFeatures - 1) / kFeatures;
  if (in_block) {
    if (tokens != 128 || !dense_gemm_wgmma_in_block(p)) return cudaErrorInvalidValue;
    return out_float32 ? launch<128, float, true>(p, device, stream) : launch<128, __nv_bfloat16, true>(p, device, stream);
  }
  switch (tokens) {
    case 64: return out_float32 ? launch<64, float>(p, device, stream) : launch<64, __nv_bfloat16>(p, device, stream);
    case 128: return out_float32 ? launch<128, float>(p, device, stream) : launch<128, __nv_bfloat16>(p, device, stream);
    case 192: return out_float32 ? launch<192, float>(p, device, stream) : launch<192, __nv_bfloat16>(p, device, stream);
    case 256: return out_float32 ? launch<256, float>(p, device, stream) : launch<256, __nv_bfloat16>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace deepinfer::model::cuda
