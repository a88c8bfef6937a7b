// Torch-free probe of the Hopper attention kernel's memory side (model/cuda/sparse_attention_sm90.cu):
// how fast thread blocks bring gathered 1 KB key rows (512 bfloat16) into shared memory, tile after
// tile of 64 rows, with no arithmetic; `tests/gpu/kernel_micro.sh gather` builds it with nvcc alone.
// It answers what a design without the pair's merge would need: each block of a row's pair holding
// all of the row's keys (twice the bytes into the SMs, once from HBM) instead of half of them.
// Patterns (one row of the batch = two blocks, 128 at batch 64):
//   half-cp.async  each block 5 tiles of its own rows by 16-byte cp.async (the kept kernel's copies)
//   half-tma       the same rows by the tensor-memory accelerator, a 64 x 1 box per 128 bytes
//   all-cp.async   each block all 10 tiles of the row (the pair reads the same rows)
//   all-tma        the same by the tensor-memory accelerator
//   all-multicast  a cluster of the pair's two blocks: each block asks for half of every tile's rows,
//                  multicast to both (each row read from L2 once, landing in both blocks)
//   half-tma-8, all-tma-8  the boxes issued by all 8 warps instead of one
//   all-cp.async-4w  all 10 tiles by cp.async issued by 4 warps (one a scheduler), as the head-split
//                  kernel's copying warpgroup does (model/cuda/sparse_attention_heads.cu)
// Every block keeps 2 tiles in flight (3 buffers of 64 KB); a landed tile is "used" by XORing one
// word a thread into a result. Rows are random among 256 MB of rows (beyond the L2), a new set of
// rows each launch; timing: 20 launches in a CUDA graph, the best of 5 replays after a warm-up one.
//   gather_probe [--rows 64]
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"

namespace {

constexpr int kThreads = 256, kTileRows = 64, kRowBytes = 1024, kTileBytes = kTileRows * kRowBytes, kBuffers = 3;
constexpr int kLaunches = 20, kSets = 4;
constexpr int64_t kPoolRows = (int64_t{256} << 20) / kRowBytes;
enum Pattern { kHalfCpAsync, kHalfTma, kAllCpAsync, kAllTma, kAllMulticast, kHalfTma8, kAllTma8, kAllCpAsync4, kPatterns };
const char* const kNames[kPatterns] = {"half-cp.async", "half-tma",   "all-cp.async", "all-tma",
                                       "all-multicast", "half-tma-8", "all-tma-8",    "all-cp.async-4w"};

// Whether each block of the pattern brings all of a row's 640 keys (else its half).
__host__ __device__ bool all_keys(int p) {
  return p == kAllCpAsync || p == kAllTma || p == kAllMulticast || p == kAllTma8 || p == kAllCpAsync4;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gather_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using deepinfer::model::cuda::shared_address;
using namespace deepinfer::model::cuda::sm90;

struct Args {
  const uint8_t* pool;  // kPoolRows rows of kRowBytes
  const int32_t* rows;  // [row of the batch][640] pool rows
  uint32_t* out;        // [blocks] one word a block
  int pattern;
};

// Tile t's rows by 16-byte cp.async from `Warps` warps (warp w copies rows w k .. w k + k - 1,
// k = 64 / Warps, half a row a copy), each thread's copies arriving on `full` once landed.
template <int Warps>
__device__ __forceinline__ void copy_rows(const Args& a, const int32_t* list, int t, uint8_t* dst, uint64_t* full, int warp, int lane) {
  constexpr int kRows = kTileRows / Warps;
#pragma unroll
  for (int j = 0; j < 2 * kRows; ++j) {
    const int r = kRows * warp + j / 2, chunk = (j % 2) * 32 + lane, c = chunk / 8, q = chunk % 8;
    const uint8_t* src = a.pool + int64_t{list[t * kTileRows + r]} * kRowBytes + chunk * 16;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst + c * 8192 + r * 128 + ((q ^ (r % 8)) << 4))),
                 "l"(src)
                 : "memory");
  }
  arrive_after_copies(full);
}

// Tile t of the block's list into `dst` (swizzled as the kernel's column tiles: column tile c of row
// r at c 8 KB + r 128, 16-byte chunk q at q ^ (r % 8)).
__device__ __forceinline__ void copy_tile(const Args& a, const CUtensorMap* map, const int32_t* list, int t, uint8_t* dst, uint64_t* full,
                                          bool multicast, int rank) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (a.pattern == kHalfCpAsync || a.pattern == kAllCpAsync) {
    copy_rows<8>(a, list, t, dst, full, warp, lane);
    return;
  }
  if (a.pattern == kAllCpAsync4) {
    if (warp < 4) copy_rows<4>(a, list, t, dst, full, warp, lane);
    return;
  }
  // The tensor-memory accelerator: warp 0's lanes issue a row's 8 boxes each (2 rows a lane), or
  // in a multicast half of the rows (those of this block's rank), to both blocks; the -8 patterns
  // spread the boxes over the 8 warps (warp w rows 8 w .. + 7, 2 boxes a lane).
  const bool spread = a.pattern == kHalfTma8 || a.pattern == kAllTma8;
  if (threadIdx.x == 0) arrive_expect_bytes(full, kTileBytes);  // bytes may land before it: the phase needs this arrival
  if (spread) {
    const int r = 8 * warp + lane / 4, row = list[t * kTileRows + r];
#pragma unroll
    for (int c = 2 * (lane % 4); c < 2 * (lane % 4) + 2; ++c)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
                       shared_address(dst + c * 8192 + r * 128)),
                   "l"(reinterpret_cast<uint64_t>(map)), "r"(64 * c), "r"(row), "r"(shared_address(full))
                   : "memory");
    return;
  }
  if (warp != 0) return;
  for (int r = lane; r < kTileRows; r += 32) {
    if (multicast && (r % 2) != rank) continue;
    const int row = list[t * kTileRows + r];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uint32_t d = shared_address(dst + c * 8192 + r * 128);
      if (multicast) {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], "
            "%5;\n" ::"r"(d),
            "l"(reinterpret_cast<uint64_t>(map)), "r"(64 * c), "r"(row), "r"(shared_address(full)), "h"(static_cast<uint16_t>(3))
            : "memory");
      } else {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(d),
                     "l"(reinterpret_cast<uint64_t>(map)), "r"(64 * c), "r"(row), "r"(shared_address(full))
                     : "memory");
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) gather_kernel(const Args a, const __grid_constant__ CUtensorMap map) {
  extern __shared__ __align__(1024) uint8_t shared_raw[];
  uint8_t* tiles = shared_raw + ((1024 - (shared_address(shared_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(tiles + kBuffers * kTileBytes);
  const int pair = blockIdx.x / 2, rank = blockIdx.x % 2;
  const bool all = all_keys(a.pattern);
  const bool multicast = a.pattern == kAllMulticast;
  const int tiles_n = all ? 10 : 5;
  const int32_t* list = a.rows + int64_t{pair} * 640 + (all ? 0 : rank * 320);
  const bool tma = a.pattern != kHalfCpAsync && a.pattern != kAllCpAsync && a.pattern != kAllCpAsync4;
  if (threadIdx.x == 0)
    for (int b = 0; b < kBuffers; ++b) init_barrier(&full[b], tma ? 1 : a.pattern == kAllCpAsync4 ? 128 : kThreads);
  __syncthreads();
  if (multicast) cluster_sync();  // both blocks' barriers set up before either's copies land
  uint32_t acc = 0;
  for (int t = 0; t < 2 && t < tiles_n; ++t)
    copy_tile(a, &map, list, t, tiles + (t % kBuffers) * kTileBytes, &full[t % kBuffers], multicast, rank);
  for (int t = 0; t < tiles_n; ++t) {
    const int b = t % kBuffers;
    wait_barrier(&full[b], (t / kBuffers) & 1);
    acc ^= reinterpret_cast<const uint32_t*>(tiles + b * kTileBytes)[threadIdx.x * 61 % (kTileBytes / 4)];
    if (t + 2 < tiles_n) {
      // Buffer (t + 2) % 3 was last used by tile t - 1: both blocks of a multicast pair are past it.
      if (multicast)
        cluster_sync();
      else
        __syncthreads();
      copy_tile(a, &map, list, t + 2, tiles + ((t + 2) % kBuffers) * kTileBytes, &full[(t + 2) % kBuffers], multicast, rank);
    }
  }
  if (multicast) cluster_sync();                    // no block leaves while the other's copies may still land in it
  if (acc == 0x12345678u) a.out[blockIdx.x] = acc;  // keeps the reads
}

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found), "driver entry point");
  if (found != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "gather_probe: no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 64;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--rows") == 0) rows = std::atoi(argv[i + 1]);
  uint8_t* pool = nullptr;
  check(cudaMalloc(&pool, kPoolRows * kRowBytes), "cudaMalloc pool");
  check(cudaMemset(pool, 1, kPoolRows * kRowBytes), "cudaMemset");
  std::mt19937 rng(7);
  std::vector<int32_t*> lists(kSets);
  for (auto& l : lists) {
    std::vector<int32_t> host(size_t(rows) * 640);
    for (auto& r : host) r = static_cast<int32_t>(rng() % kPoolRows);
    check(cudaMalloc(&l, host.size() * 4), "cudaMalloc rows");
    check(cudaMemcpy(l, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  uint32_t* out = nullptr;
  check(cudaMalloc(&out, size_t(2 * rows) * 4), "cudaMalloc out");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {512, static_cast<cuuint64_t>(kPoolRows)}, strides[1] = {kRowBytes};
  const cuuint32_t box[2] = {64, 1}, element_strides[2] = {1, 1};
  if (encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, pool, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "gather_probe: cuTensorMapEncodeTiled failed\n");
    return 1;
  }
  const size_t shared = kBuffers * kTileBytes + kBuffers * 8 + 1024;
  check(cudaFuncSetAttribute(gather_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)), "smem");
  check(cudaFuncSetAttribute(gather_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "cluster");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  std::printf("gather_probe: %d rows of the batch (%d blocks of %d threads), 64-row tiles of 1 KB rows, 2 tiles in flight a block\n", rows,
              2 * rows, kThreads);
  for (int p = 0; p < kPatterns; ++p) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(2 * rows);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;  // every pattern in clusters of two, so the blocks are placed alike
    cudaGraph_t graph;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
    for (int i = 0; i < kLaunches; ++i) {
      const Args a{pool, lists[i % kSets], out, p};
      check(cudaLaunchKernelEx(&config, gather_kernel, a, map), "launch");
    }
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec;
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    float best = 1e30f;
    for (int r = 0; r < 6; ++r) {
      check(cudaEventRecord(start, stream), "record");
      check(cudaGraphLaunch(exec, stream), "graph launch");
      check(cudaEventRecord(stop, stream), "record");
      check(cudaEventSynchronize(stop), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
      if (r > 0) best = std::min(best, ms);
    }
    const double us = best * 1e3 / kLaunches;
    const bool all = all_keys(p);
    const double into_sms = double(2 * rows) * (all ? 10 : 5) * kTileBytes, from_l2 = p == kAllMulticast ? into_sms / 2 : into_sms;
    const double distinct = double(rows) * 10 * kTileBytes;
    std::printf("  %-14s %7.2f us a launch: %6.1f GB/s a block, %5.2f TB/s into the SMs, %5.2f TB/s from L2, %5.2f TB/s of distinct rows\n",
                kNames[p], us, into_sms / (2 * rows) / us * 1e-3, into_sms / us * 1e-6, from_l2 / us * 1e-6, distinct / us * 1e-6);
    check(cudaGraphExecDestroy(exec), "destroy");
    check(cudaGraphDestroy(graph), "destroy");
  }
  return 0;
}
