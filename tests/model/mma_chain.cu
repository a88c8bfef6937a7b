// Torch-free probe of the FP4 decode kernel's inner loop (model/cuda/moe_fp4_decode.cu): how long
// a chain of dependent mma.sync m16n8k16 (bf16 in, float32 accumulators) takes on Hopper, and how
// the kernel's superblock (the dequantization of a lane's 32 raw bytes, the B operand's four
// 16-byte shared-memory reads, eight MMAs into one accumulator) runs with W warps a multiprocessor,
// with no global memory in the loop. A decode warp's reduction is one such chain (K / 16 MMAs
// into the same four accumulators), so the chain's latency is a floor under its time.
// tests/gpu/moe_micro.sh chain builds it with nvcc alone. Patterns, each warp looping `n` times:
//   chain    one dependent MMA a step (cycles a step = the MMA's latency when the warp is alone)
//   chain2   two independent chains a warp, one MMA of each a step
//   sb       the decode superblock: a lane's raw weights read from shared memory (one of four
//            slots in turn, so that nothing is folded or hoisted), dequantized
//            (moe_fp4_weights.cuh), 4 LDS.128 of B, 8 MMAs in one chain
//   sb2      the same with the 8 MMAs alternating between two accumulators (a split chain; other
//            bits than the kernel's)
// Cycles from clock64() in each warp; printed: the median warp's cycles a step or a superblock.
//   mma_chain [steps]
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/cuda/mma.cuh"
#include "model/cuda/moe_fp4_weights.cuh"

namespace {

using namespace deepinfer::model::cuda;
using moe_fp4_detail::Raw;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mma_chain: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

enum Pattern { kChain, kChain2, kSb, kSb2 };
const char* name(int p) { return p == kChain ? "chain" : p == kChain2 ? "chain2" : p == kSb ? "sb" : "sb2"; }

__global__ void probe(int pattern, int n, long long* cycles, float* sink) {
  __shared__ __align__(16) uint8_t rows[4096];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) reinterpret_cast<uint32_t*>(rows)[i] = 0x3F803F80u ^ (i * 0x00010001u);
  __syncthreads();
  const int lane = threadIdx.x & 31;
  float acc[4] = {0, 0, 0, 0}, acc2[4] = {0, 0, 0, 0};
  uint32_t a[4] = {0x3F803F80u ^ lane, 0x3F80BF80u, 0x3F003F80u, 0x3F803F00u ^ lane};
  uint32_t b0 = 0x3F803F80u ^ (lane << 3), b1 = 0x3F00BF80u;
  // Four superblocks of raw weights a lane, read from shared memory in turn (as the prefill reads
  // its ring's slots), so that ptxas cannot fold or hoist their dequantization.
  __shared__ Raw slots[4][32];
  if (threadIdx.x < 32) {
    for (int s = 0; s < 4; ++s) {
      slots[s][lane].lo = make_uint4(0x12345678u ^ lane ^ s, 0x9ABCDEF0u, 0x0F1E2D3Cu + s, 0x4B5A6978u);
      slots[s][lane].hi = make_uint4(0x87654321u, 0x0FEDCBA9u ^ lane, 0xC3D2E1F0u ^ (s << 8), 0x78695A4Bu);
      slots[s][lane].lo_scale = 126 + (lane & 3);
      slots[s][lane].hi_scale = 125 + s;
    }
  }
  __syncthreads();
  const uint32_t off = 64 * (lane & 3) + 16 * ((lane >> 2) & 3);
  __syncwarp();
  const long long start = clock64();
  if (pattern == kChain) {
    for (int i = 0; i < n; ++i) mma(acc, a, b0, b1);
  } else if (pattern == kChain2) {
    for (int i = 0; i < n; ++i) {
      mma(acc, a, b0, b1);
      mma(acc2, a, b0, b1);
    }
  } else {
    for (int i = 0; i < n; ++i) {
      uint32_t f[8][4];
      moe_fp4_detail::dequantize(slots[i & 3][lane], f);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint4 v = *reinterpret_cast<const uint4*>(rows + ((off + 256 * (i & 7)) ^ (w << 4)));
        mma(acc, f[2 * w], v.x, v.y);
        if (pattern == kSb) {
          mma(acc, f[2 * w + 1], v.z, v.w);
        } else {
          mma(acc2, f[2 * w + 1], v.z, v.w);
        }
      }
    }
  }
  const long long stop = clock64();
  if (lane == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = stop - start;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3] + acc2[0] + acc2[1] + acc2[2] + acc2[3];
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("mma_chain: no CUDA device; nothing measured\n");
    return 0;
  }
  const int steps = argc > 1 ? std::atoi(argv[1]) : 512;
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  long long* cycles = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&cycles, sizeof(long long) * sms * 32), "malloc");
  check(cudaMalloc(&sink, sizeof(float) * sms * 1024), "malloc");
  std::printf("mma_chain: one block a multiprocessor (%d), W warps a block, %d steps; the median warp's cycles\n", sms, steps);
  for (int p = kChain; p <= kSb2; ++p) {
    for (const int warps : {1, 4, 8, 12, 16, 24}) {
      long long med = 0;
      for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
        probe<<<sms, warps * 32>>>(p, steps, cycles, sink);
        check(cudaGetLastError(), "launch");
        check(cudaDeviceSynchronize(), "run");
        std::vector<long long> c(sms * warps);
        check(cudaMemcpy(c.data(), cycles, sizeof(long long) * c.size(), cudaMemcpyDeviceToHost), "copy");
        std::sort(c.begin(), c.end());
        med = c[c.size() / 2];
      }
      const bool sb = p == kSb || p == kSb2;
      const int mmas = sb ? 8 : p == kChain2 ? 2 : 1;  // MMAs a warp a step (or superblock)
      std::printf("  %-6s %2d warps: %7.1f cycles a %s (%5.1f a warp's MMA; %5.2f MMAs a cycle an SM)\n", name(p), warps,
                  double(med) / steps, sb ? "superblock" : "step", double(med) / steps / mmas, double(steps) * mmas * warps / double(med));
    }
  }
  return 0;
}
