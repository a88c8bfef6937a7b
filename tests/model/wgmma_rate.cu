// Torch-free probe of the FP4 prefill kernel's inner loop (model/cuda/moe_fp4_prefill.cu): how
// fast Hopper's wgmma m64nNk16 with A in registers runs at the widths that kernel uses, alone and
// with the kernel's dequantization in front of it, so that the kernel's time can be set against
// the ceiling of its instruction mix (tests/gpu/moe_micro.sh rate builds it with nvcc alone).
// One block a multiprocessor (132 on an H200), `groups` warpgroups a block, each looping over
// "superblocks" as the kernel does: eight k16 steps (wgmma m64nNk16, A the warp's mma.sync
// fragments, B a K-major 128-byte-swizzled image of N rows in shared memory, filled with random
// bfloat16), then the patterns below. No global memory in the loop and no barrier between the
// warpgroups. The values are random; the accumulators are stored at the end so nothing is dropped.
//   rs     the eight wgmmas, commit, wait for them (wgmma.wait_group 0), as the kernel does
//   pipe   the same with wait_group 1: two superblocks in flight, the tensor pipe's own rate
//   dq+rs  a lane's raw weights (32 bytes and two scales) read from shared memory, dequantized
//          (moe_fp4_weights.cuh), then rs: the kernel's loop without its copies and barriers
//   dq     the dequantization alone (its words XORed together)
// Timing: one launch as warm-up, then the median of 5 (CUDA events); the SM clock from clock64()
// against %globaltimer in block 0 during the timed launch. FLOPs: 2 x 64 x N x 16 per wgmma.
//   wgmma_rate [superblocks]
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/cuda/moe_fp4_weights.cuh"
#include "model/cuda/wgmma.cuh"
#include "model/cuda/wgmma_rs.cuh"

namespace {

using namespace deepinfer::model::cuda;
using moe_fp4_detail::Raw;

enum class Pattern { kRs, kPipe, kDequantRs, kDequant };
const char* pattern_name(Pattern p) {
  return p == Pattern::kRs ? "rs" : p == Pattern::kPipe ? "pipe" : p == Pattern::kDequantRs ? "dq+rs" : "dq";
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "wgmma_rate: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int kSlots = 4;  // raw weights in shared memory a warp, read in turn (the kernel's ring depth)

template <int N>
__device__ __forceinline__ void step(float* acc, const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (N == 16) wgmma_m64n16k16_rs(acc, a, desc);
  if constexpr (N == 32) wgmma_m64n32k16_rs(acc, a, desc);
  if constexpr (N == 48) wgmma_m64n48k16_rs(acc, a, desc);
  if constexpr (N == 64) wgmma_m64n64k16_rs(acc, a, desc);
  if constexpr (N == 80) wgmma_m64n80k16_rs(acc, a, desc);
  if constexpr (N == 96) wgmma_m64n96k16_rs(acc, a, desc);
  if constexpr (N == 112) wgmma_m64n112k16_rs(acc, a, desc);
  if constexpr (N == 128) wgmma_m64n128k16_rs(acc, a, desc);
}

// The superblock's eight k16 steps on the image at `b` (N rows, two 64-value panels), as
// moe_fp4_prefill.cu's multiply_rows issues them.
template <int N>
__device__ __forceinline__ void superblock(float* acc, const uint32_t (&a)[8][4], const uint8_t* b) {
  const uint64_t base = wgmma_descriptor(b, 16, 1024);
#pragma unroll
  for (int s = 0; s < 8; ++s) step<N>(acc, a[s], base + static_cast<uint32_t>(((s >> 2) * (N * 128) + 32 * (s & 3)) >> 4));
}

template <int N, Pattern P>
__global__ void __launch_bounds__(384, 1) rate_kernel(int superblocks, const uint4* raw_init, float* out, long long* clocks) {
  extern __shared__ uint8_t shared_raw[];
  uint8_t* image = shared_raw + ((1024u - (shared_address(shared_raw) & 1023u)) & 1023u);  // N x 256 bytes
  uint4* raw = reinterpret_cast<uint4*>(image + N * 256);                                  // [warps][kSlots][32 lanes][3]
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int i = threadIdx.x; i < N * 16; i += blockDim.x) reinterpret_cast<uint4*>(image)[i] = raw_init[i & 4095];
  for (int i = threadIdx.x; i < warps * kSlots * 32 * 3; i += blockDim.x) raw[i] = raw_init[(i * 7 + 3) & 4095];
  __syncthreads();
  long long c0 = 0, t0 = 0;
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  }
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  uint32_t a[8][4];
  {
    const uint4* r = raw + (warp * kSlots * 32 + lane) * 3;
    const Raw w{r[0], r[1], r[2].x & 0x7F, r[2].y & 0x7F};
    moe_fp4_detail::dequantize(w, a);
  }
  uint32_t sink = 0;
  for (int sb = 0; sb < superblocks; ++sb) {
    if constexpr (P == Pattern::kDequantRs || P == Pattern::kDequant) {
      const uint4* r = raw + ((warp * kSlots + (sb & (kSlots - 1))) * 32 + lane) * 3;
      const Raw w{r[0], r[1], r[2].x & 0x7F, r[2].y & 0x7F};
      moe_fp4_detail::dequantize(w, a);
    }
    if constexpr (P == Pattern::kDequant) {
#pragma unroll
      for (int s = 0; s < 8; ++s) sink ^= a[s][0] ^ a[s][1] ^ a[s][2] ^ a[s][3];
    } else {
      wgmma_fence();
      superblock<N>(acc, a, image);
      wgmma_commit();
      if constexpr (P == Pattern::kPipe) {
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
#pragma unroll
      for (int s = 0; s < 8; ++s) asm volatile("" : "+r"(a[s][0]), "+r"(a[s][1]), "+r"(a[s][2]), "+r"(a[s][3])::"memory");
      wgmma_settle(acc);
    }
  }
  wgmma_wait<0>();
  wgmma_settle(acc);
  float total = __uint_as_float(sink & 0x3FFFFFFF);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) total += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = total;
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    clocks[0] = clock64() - c0;
    clocks[1] = t1 - t0;
  }
}

struct Setup {
  int sms, superblocks;
  const uint4* raw;
  float* out;
  long long* clocks;
};

template <int N, Pattern P>
void measure(const Setup& s, int groups) {
  const int threads = 128 * groups;
  const size_t shared = 1024 + N * 256 + static_cast<size_t>(threads / 32) * kSlots * 32 * 3 * 16;
  check(cudaFuncSetAttribute(rate_kernel<N, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)), "shared memory");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> times;
  long long clocks[2] = {0, 0};
  for (int rep = 0; rep < 6; ++rep) {
    check(cudaEventRecord(start), "record");
    rate_kernel<N, P><<<s.sms, threads, shared>>>(s.superblocks, s.raw, s.out, s.clocks);
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "launch");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (rep > 0) times.push_back(ms);
    if (rep == 3) check(cudaMemcpy(clocks, s.clocks, sizeof(clocks), cudaMemcpyDeviceToHost), "clocks");
  }
  std::sort(times.begin(), times.end());
  const double us = times[times.size() / 2] * 1e3;
  const double flops = 2.0 * 64 * N * 16 * 8 * double(s.superblocks) * groups * s.sms;
  const double ghz = clocks[1] > 0 ? double(clocks[0]) / double(clocks[1]) : 0.0;
  const double cycles_per_sb = ghz > 0 ? us * 1e3 * ghz / s.superblocks : 0.0;
  if (P == Pattern::kDequant) {
    std::printf("%-6s N %3d  groups %d  %9.1f us  %6.3f GHz  %7.1f cycles a superblock a block\n", pattern_name(P), N, groups, us, ghz,
                cycles_per_sb);
  } else {
    std::printf(
        "%-6s N %3d  groups %d  %9.1f us  %7.1f TFLOP/s  %5.1f%% of 790  %6.3f GHz  %7.1f cycles a superblock a block  %6.1f%% of 4,096 "
        "FLOP/clk/SM\n",
        pattern_name(P), N, groups, us, flops / us * 1e-6, flops / us * 1e-6 / 7.9, ghz, cycles_per_sb,
        ghz > 0 ? 100.0 * flops / (us * 1e3 * ghz * s.sms) / 4096 : 0.0);
  }
  check(cudaEventDestroy(start), "event");
  check(cudaEventDestroy(stop), "event");
}

template <int N>
void width(const Setup& s) {
  for (int groups : {2, 3}) {
    measure<N, Pattern::kRs>(s, groups);
    measure<N, Pattern::kPipe>(s, groups);
    measure<N, Pattern::kDequantRs>(s, groups);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Setup s{};
  s.superblocks = argc > 1 ? std::atoi(argv[1]) : 4000;
  check(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  std::vector<uint32_t> host(4096 * 4);
  uint32_t x = 12345;
  for (auto& v : host) {
    x = x * 1664525u + 1013904223u;
    // Random bfloat16 pairs of magnitude about 1 (B), which are also random FP4 codes (A).
    v = ((x >> 8) & 0x007F007Fu) | 0x3F003F00u | (x & 0x80008000u);
  }
  uint4* raw;
  check(cudaMalloc(&raw, host.size() * 4), "malloc");
  check(cudaMemcpy(raw, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "copy");
  s.raw = raw;
  check(cudaMalloc(&s.out, sizeof(float) * s.sms * 384), "malloc");
  check(cudaMalloc(&s.clocks, sizeof(long long) * 2), "malloc");
  std::printf("wgmma_rate: %d SMs, one block each, %d superblocks (8 wgmma m64nNk16) a warpgroup\n", s.sms, s.superblocks);
  measure<128, Pattern::kDequant>(s, 2);
  width<16>(s);
  width<32>(s);
  width<48>(s);
  width<64>(s);
  width<80>(s);
  width<96>(s);
  width<112>(s);
  width<128>(s);
  return 0;
}
