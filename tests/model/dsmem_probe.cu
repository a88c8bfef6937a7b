// Torch-free probe of the SM-to-SM network (distributed shared memory) that the Hopper attention
// kernel's pair exchange uses (merge_pair in model/cuda/sparse_attention_sm90_merge.cuh): how long
// each block of a two-block cluster takes to put `bytes` into the other's shared memory and see the
// other's land, by three means; `tests/gpu/kernel_micro.sh dsmem` builds it with nvcc alone.
//   stores    every thread 16-byte remote stores (st.shared::cluster.v4), then a cluster barrier
//             (release / acquire), as the kept kernel's merge does
//   st.async  every thread 16-byte st.async completing on the receiver's mbarrier (bytes counted)
//   bulk      the block's bytes staged in its own shared memory, then `copies` bulk copies
//             (cp.async.bulk.shared::cluster.shared::cta) issued by one thread, completing on the
//             receiver's mbarrier
//   one-way   st.async from block 0 of the cluster to block 1 only (the span is block 1's): whether
//             the two directions share a block's link
// 64 clusters (128 blocks, one a multiprocessor, as at batch 64) unless --clusters says otherwise.
// Each block stamps the global timer after a cluster barrier that starts the exchange and once
// the other's bytes are in; the figure is the median over blocks of that span, from the best of 5
// launches after a warm-up one.
//   dsmem_probe [--clusters 64]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBytes = 96 << 10;
constexpr int kShared = 2 * kMaxBytes + 1024;  // [received | staged], the mbarrier after
enum Mode { kStores, kStAsync, kBulk, kOneWay, kModes };
const char* const kNames[kModes] = {"stores", "st.async", "bulk", "one-way"};

using deepinfer::model::cuda::shared_address;
using namespace deepinfer::model::cuda::sm90;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "dsmem_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    exchange(int mode, int bytes, int copies, unsigned long long* spans, float* sink) {
  extern __shared__ __align__(1024) unsigned char shared[];
  unsigned char* received = shared;
  unsigned char* staged = shared + kMaxBytes;
  uint64_t* barrier = reinterpret_cast<uint64_t*>(shared + 2 * kMaxBytes);
  const uint32_t rank = blockIdx.x % 2, other = 1 - rank;
  const int pieces = bytes / 16 / kThreads;  // 16-byte pieces a thread
  if (threadIdx.x == 0) {
    init_barrier(barrier, 1);
    // this block's one arrival and the bytes to come (one-way: block 1 of the cluster receives, block 0 nothing)
    if (mode != kStores) arrive_expect_bytes(barrier, mode == kOneWay && rank == 0 ? 0 : bytes);
  }
  float x = threadIdx.x * 0.5f + blockIdx.x;
  if (mode == kBulk) {
    for (int i = 0; i < pieces; ++i) reinterpret_cast<float4*>(staged)[i * kThreads + threadIdx.x] = make_float4(x, x + 1, x + 2, x + 3);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  cluster_sync();  // both barriers set up, the staged bytes written
  const uint64_t start = global_ns();
  const uint32_t remote = remote_address(received, other), remote_barrier = remote_address(barrier, other);
  if (mode == kStores) {
    for (int i = 0; i < pieces; ++i) store_remote(remote + (i * kThreads + threadIdx.x) * 16, x, x + 1, x + 2, x + 3);
    cluster_sync();
  } else {
    if (mode == kStAsync || (mode == kOneWay && rank == 0)) {
      for (int i = 0; i < pieces; ++i) store_async(remote + (i * kThreads + threadIdx.x) * 16, x, x + 1, x + 2, x + 3, remote_barrier);
    } else if (mode == kBulk && threadIdx.x == 0) {
      const int each = bytes / copies;
      for (int c = 0; c < copies; ++c) {
        asm volatile(
            "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(remote + c * each),
            "r"(shared_address(staged + c * each)), "r"(each), "r"(remote_barrier)
            : "memory");
      }
    }
    wait_barrier_cluster(barrier, 0);
  }
  const uint64_t end = global_ns();
  if (threadIdx.x == 0) spans[blockIdx.x] = end - start;
  sink[blockIdx.x * kThreads + threadIdx.x] = reinterpret_cast<const float*>(received)[threadIdx.x * 4 + 1];
  cluster_sync();  // neither block leaves while the other may still write into it
}

}  // namespace

int main(int argc, char** argv) {
  int clusters = 64;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--clusters") == 0) clusters = std::atoi(argv[i + 1]);
  const int blocks = 2 * clusters;
  unsigned long long* spans = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&spans, blocks * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMalloc(&sink, blocks * kThreads * sizeof(float)), "cudaMalloc");
  check(cudaFuncSetAttribute(exchange, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared), "shared memory");
  std::printf("dsmem_probe: %d clusters of 2 blocks, %d threads a block; median over blocks of the exchange's span\n", clusters, kThreads);
  for (int bytes : {32 << 10, 64 << 10, 96 << 10}) {
    for (int mode = 0; mode < kModes; ++mode) {
      for (int copies : {1, 4, 16}) {
        if (mode != kBulk && copies != 1) continue;
        double best = 1e30;
        std::vector<unsigned long long> host(blocks);
        for (int run = 0; run < 6; ++run) {
          exchange<<<blocks, kThreads, kShared>>>(mode, bytes, copies, spans, sink);
          check(cudaGetLastError(), "launch");
          check(cudaDeviceSynchronize(), "exchange");
          check(cudaMemcpy(host.data(), spans, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "copy");
          if (mode == kOneWay) {  // the receivers' spans alone
            for (int b = 0; b < clusters; ++b) host[b] = host[2 * b + 1];
            host.resize(clusters);
          }
          std::sort(host.begin(), host.end());
          if (run > 0) best = std::min(best, double(host[host.size() / 2]));
          host.resize(blocks);
        }
        std::printf("  %-8s %3d KB%s: %6.2f us a block, %6.1f GB/s a block, %5.2f TB/s in all\n", kNames[mode], bytes >> 10,
                    mode == kBulk ? (copies == 1   ? " in 1 copy  "
                                     : copies == 4 ? " in 4 copies"
                                                   : " in 16 copies")
                                  : "            ",
                    best * 1e-3, bytes / best, bytes / best * (mode == kOneWay ? clusters : blocks) * 1e-3);  // receiving blocks
      }
    }
  }
  return 0;
}
