// Torch-free probe of the FP4 decode kernels' memory side (model/cuda/moe_fp4_decode.cu): the
// HBM read rate of their access pattern with no arithmetic, beside variants of that pattern, to
// tell the loads' cost from the kernel's (tests/gpu/moe_micro.sh probe builds it with nvcc alone).
// One v4-flash-slice layer at batch 1: 6 experts; gate/up reads w1 and w3 [2048 rows x 2048 B]
// (D 4096), down reads w2 [4096 x 1024 B] (I 2048), with their e8m0 scales [rows x K / 32]. The
// grid is the kernel's at batch 1: 384 blocks of 4 warps, one item (32 features of w1 and w3, or
// 64 rows of w2) a block; dynamic shared memory as the kernel's rows take (8 K bfloat16) unless a
// line says otherwise, so as many blocks are resident. The loaded words are XORed into one word a
// thread and stored, so no load is dropped.
// Timing: 40 launches in a CUDA graph rotating over 8 sets of weights (about 380 MB, beyond the
// L2), the best of 5 replays after a warm-up one; bytes = packed codes + scales read once.
//   moe_load_probe
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kExperts = 6, kSets = 8, kBlocks = 384, kThreads = 128, kLaunches = 40;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "moe_load_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Matrices {
  const uint8_t* const* lo;  // [kExperts] packed matrices: w1, or w2
  const uint8_t* const* hi;  // w3, or w2 again
  const uint8_t* const* lo_scale;
  const uint8_t* const* hi_scale;
  int K;      // values a row
  bool gate;  // gate/up: 8 rows of w1 and the same 8 of w3 a warp; down: 16 consecutive rows of w2
  uint32_t* out;
};

__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {  // as moe_fp4_weights.cuh loads them
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// The warp's weight row r (0..15) of item `item`: r < 8 a row of the lo matrix, else of the hi one.
__device__ __forceinline__ int64_t row_index(const Matrices& m, int item, int warp, int r) {
  const int slice = item % 64;
  return m.gate ? slice * 32 + warp * 8 + (r & 7) : slice * 64 + warp * 16 + r;
}
__device__ __forceinline__ const uint8_t* packed_row(const Matrices& m, int item, int warp, int r) {
  return (r < 8 ? m.lo : m.hi)[item / 64] + row_index(m, item, warp, r) * (m.K / 2);
}
__device__ __forceinline__ const uint8_t* scale_row(const Matrices& m, int item, int warp, int r) {
  return (r < 8 ? m.lo_scale : m.hi_scale)[item / 64] + row_index(m, item, warp, r) * (m.K / 32);
}

// The kernel's pattern: thread (g, t) reads 16 bytes of rows g and g + 8 at 64 sb + 16 t of each
// superblock sb, and (kScales) its scale byte of each, kRing superblocks ahead in registers.
template <int kRing, bool kScales>
__global__ void __launch_bounds__(kThreads) fragment_loads(const Matrices m) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, nsb = m.K / 128;
  const uint8_t* lo = packed_row(m, blockIdx.x, warp, g) + 16 * t;
  const uint8_t* hi = packed_row(m, blockIdx.x, warp, g + 8) + 16 * t;
  const uint8_t* lo_s = scale_row(m, blockIdx.x, warp, g) + t;
  const uint8_t* hi_s = scale_row(m, blockIdx.x, warp, g + 8) + t;
  uint4 ring_lo[kRing], ring_hi[kRing];
  uint32_t scale_lo[kRing], scale_hi[kRing];
  const auto issue = [&](int s, int sb) {
    ring_lo[s] = load_weights(lo + sb * 64);
    ring_hi[s] = load_weights(hi + sb * 64);
    if (kScales) scale_lo[s] = __ldg(lo_s + 4 * sb), scale_hi[s] = __ldg(hi_s + 4 * sb);
  };
#pragma unroll
  for (int s = 0; s < kRing; ++s)
    if (s < nsb) issue(s, s);
  uint32_t acc = 0;
  for (int sb0 = 0; sb0 < nsb; sb0 += kRing) {
#pragma unroll
    for (int s = 0; s < kRing; ++s) {
      const int sb = sb0 + s;
      if (sb >= nsb) continue;
      acc ^= fold(ring_lo[s]) ^ fold(ring_hi[s]);
      if (kScales) acc += scale_lo[s] * 3 + scale_hi[s];
      if (sb + kRing < nsb) issue(s, sb + kRing);
    }
  }
  m.out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

// Whole rows instead: the warp reads its 16 rows one after the other, 512 contiguous bytes a
// load (16 a lane), kRing loads in flight; lanes 0..15 read the rows' scales at the end.
template <int kRing>
__global__ void __launch_bounds__(kThreads) row_loads(const Matrices m) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks = m.K / 2 / 512, total = 16 * chunks;
  const auto address = [&](int i) { return packed_row(m, blockIdx.x, warp, i / chunks) + 512 * (i % chunks) + 16 * lane; };
  uint4 ring[kRing];
#pragma unroll
  for (int s = 0; s < kRing; ++s) ring[s] = load_weights(address(s));
  uint32_t acc = 0;
  for (int i0 = 0; i0 < total; i0 += kRing) {
#pragma unroll
    for (int s = 0; s < kRing; ++s) {
      acc ^= fold(ring[s]);
      if (i0 + s + kRing < total) ring[s] = load_weights(address(i0 + s + kRing));
    }
  }
  if (lane < 16) {
    const uint8_t* scales = scale_row(m, blockIdx.x, warp, lane);
    for (int j = 0; j < m.K / 32; j += 16) acc ^= fold(*reinterpret_cast<const uint4*>(scales + j));
  }
  m.out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

// Device time of one launch of `kernel` with `shared` bytes of dynamic shared memory, and the
// blocks resident a multiprocessor at that.
void time_kernel(const char* name, void (*kernel)(Matrices), size_t shared, const std::vector<Matrices>& sets, double bytes,
                 cudaStream_t stream) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)), "shared limit");
  int resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, shared), "occupancy");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < kLaunches; ++i) kernel<<<kBlocks, kThreads, shared, stream>>>(sets[i % sets.size()]);
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphLaunch(exec, stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  float best_ms = 1e30f;
  for (int r = 0; r < 5; ++r) {
    check(cudaEventRecord(start, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    best_ms = std::min(best_ms, ms);
  }
  const double us = best_ms * 1000.0 / kLaunches;
  std::printf("  %-52s %2d blocks/SM %8.2f us %7.0f GB/s\n", name, resident, us, bytes / us / 1e3);
  check(cudaEventDestroy(start), "event");
  check(cudaEventDestroy(stop), "event");
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
}

// kSets sets of one GEMM's matrices (codes and scales filled with arbitrary bytes).
std::vector<Matrices> make_sets(bool gate, uint32_t* out) {
  const int K = gate ? 4096 : 2048, rows = gate ? 2048 : 4096;
  const size_t packed = static_cast<size_t>(rows) * K / 2, scales = static_cast<size_t>(rows) * K / 32;
  std::vector<Matrices> sets;
  for (int s = 0; s < kSets; ++s) {
    std::vector<const uint8_t*> table(4 * kExperts);
    for (int e = 0; e < kExperts; ++e)
      for (int part = 0; part < (gate ? 2 : 1); ++part) {
        uint8_t *codes = nullptr, *scale = nullptr;
        check(cudaMalloc(&codes, packed), "malloc");
        check(cudaMemset(codes, 0x11 * (e + 1) + part, packed), "memset");
        check(cudaMalloc(&scale, scales), "malloc");
        check(cudaMemset(scale, 120 + part, scales), "memset");
        table[part * kExperts + e] = codes;
        table[(2 + part) * kExperts + e] = scale;
        if (!gate) table[kExperts + e] = codes, table[3 * kExperts + e] = scale;
      }
    const uint8_t** device_table = nullptr;
    check(cudaMalloc(&device_table, table.size() * sizeof(void*)), "malloc");
    check(cudaMemcpy(device_table, table.data(), table.size() * sizeof(void*), cudaMemcpyHostToDevice), "copy");
    sets.push_back(Matrices{device_table, device_table + kExperts, device_table + 2 * kExperts, device_table + 3 * kExperts, K, gate, out});
  }
  return sets;
}

}  // namespace

int main() {
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  uint32_t* out = nullptr;
  check(cudaMalloc(&out, kBlocks * kThreads * sizeof(uint32_t)), "malloc");
  std::printf("FP4 decode loads alone: 6 experts, %d blocks of %d threads, %d launches in a graph over %d weight sets, best of 5\n",
              kBlocks, kThreads, kLaunches, kSets);
  for (const bool gate : {true, false}) {
    const std::vector<Matrices> sets = make_sets(gate, out);
    const int K = sets[0].K, rows = gate ? 2048 : 4096;
    const double bytes = kExperts * (gate ? 2.0 : 1.0) * (static_cast<double>(rows) * K / 2 + static_cast<double>(rows) * K / 32);
    const size_t kernel_rows = size_t{8} * K * 2;
    std::printf("%s: %.1f MB a launch\n", gate ? "gate/up (w1, w3; K 4096)" : "down (w2; K 2048)", bytes / 1e6);
    time_kernel("the kernel's: rows g, g + 8, scale bytes, 4 in registers", fragment_loads<4, true>, kernel_rows, sets, bytes, stream);
    time_kernel("the same, 8 superblocks in registers", fragment_loads<8, true>, kernel_rows, sets, bytes, stream);
    time_kernel("the same, no scale loads", fragment_loads<4, false>, kernel_rows, sets, bytes, stream);
    time_kernel("the same, 8 KB of shared memory", fragment_loads<4, true>, 8192, sets, bytes, stream);
    time_kernel("whole rows, 512 B a warp load, 4 in flight", row_loads<4>, kernel_rows, sets, bytes, stream);
    time_kernel("whole rows, 512 B a warp load, 8 in flight", row_loads<8>, kernel_rows, sets, bytes, stream);
  }
  return 0;
}
