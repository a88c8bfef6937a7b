// KernelBusyMeter with CUPTI (engine/cuda/kernel_busy.cpp) against kernels of known length and
// host-side gaps (tests/engine/spin_kernel.h): 2 ms spins, each followed by 8 ms of host sleep,
// are busy about a fifth of the wall with gaps of at least 8 ms; two spins side by side on two
// streams count once (and twice in the spin kernel's own time, top_kernels); memcpys and memsets
// are counted apart from the kernels. Built only with
// DEEPINFER_CUDA; label cuda; each test skips with a message when no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "engine/check.h"
#include "engine/cuda/kernel_busy.h"
#include "tests/engine/spin_kernel.h"

namespace deepinfer::engine::cuda {
namespace {

using kernel_busy_testing::launch_spin;

constexpr uint64_t kSpinNs = 2'000'000;
constexpr auto kSleep = std::chrono::milliseconds(8);

bool has_gpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

// The spin kernel's entry in top_kernels, or null.
const KernelTime* find_spin(const KernelBusy& busy) {
  for (const KernelTime& k : busy.top_kernels)
    if (k.name == "deepinfer::engine::kernel_busy_testing::(anon)::spin") return &k;
  return nullptr;
}

// The first launch loads the module: done before a window opens, so that it is not measured.
void warm_up() {
  ASSERT_EQ(launch_spin(/*ns=*/1000, /*stream=*/nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(KernelBusyMeterCuda, SpinsBetweenHostSleepsAreBusyTheirShareOfTheWall) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device: the kernel-busy meter is unverified";
  constexpr int kKernels = 25;
  KernelBusyMeter meter;
  warm_up();
  meter.start();
  for (int i = 0; i < kKernels; ++i) {
    ASSERT_EQ(launch_spin(kSpinNs, /*stream=*/nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::this_thread::sleep_for(kSleep);
  }
  const KernelBusy busy = meter.stop();
  EXPECT_EQ(busy.kernels.count, kKernels);
  EXPECT_EQ(busy.dropped_records, 0);
  EXPECT_GE(busy.wall_s, kKernels * 10e-3);
  EXPECT_GE(busy.kernels.busy_s, kKernels * 2e-3);  // each spin lasts at least its 2 ms
  EXPECT_LT(busy.kernels.busy_s, kKernels * 2.5e-3);
  EXPECT_GT(busy.kernels.fraction, 0.1);
  EXPECT_LT(busy.kernels.fraction, 0.3);
  EXPECT_GE(busy.kernels.mean_gap_us, 7900);  // 8 ms of sleep between a kernel's end and the next launch
  EXPECT_LT(busy.kernels.mean_gap_us, 20000);
  EXPECT_EQ(busy.memcpy.count, 0);
  EXPECT_EQ(busy.memset.count, 0);
  EXPECT_EQ(busy.top_kernels.size(), 1u) << "only the spin kernel ran";
  const KernelTime* spin = find_spin(busy);
  ASSERT_NE(spin, nullptr) << "top_kernels names it " << (busy.top_kernels.empty() ? "(none)" : busy.top_kernels.front().name);
  EXPECT_EQ(spin->count, kKernels);
  EXPECT_DOUBLE_EQ(spin->total_s, busy.kernels.busy_s);  // one stream, no overlap
  EXPECT_GE(spin->mean_us, 2000);
  EXPECT_LT(spin->mean_us, 2500);
  std::printf("kernel busy: %.1f%% of %.3f s wall (%ld kernels, mean gap %.1f us)\n", 100 * busy.kernels.fraction, busy.wall_s,
              long(busy.kernels.count), busy.kernels.mean_gap_us);
}

TEST(KernelBusyMeterCuda, ConcurrentKernelsCountOnce) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device: the kernel-busy meter is unverified";
  constexpr int kPairs = 10;
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  KernelBusyMeter meter;
  warm_up();
  meter.start();
  for (int i = 0; i < kPairs; ++i) {
    ASSERT_EQ(launch_spin(kSpinNs, a), cudaSuccess);
    ASSERT_EQ(launch_spin(kSpinNs, b), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::this_thread::sleep_for(kSleep);
  }
  const KernelBusy busy = meter.stop();
  EXPECT_EQ(busy.kernels.count, 2 * kPairs);
  EXPECT_GE(busy.kernels.busy_s, kPairs * 2e-3);
  EXPECT_LT(busy.kernels.busy_s, kPairs * 3e-3) << "the two streams' spins should overlap (4 ms a pair, were they summed)";
  const KernelTime* spin = find_spin(busy);
  ASSERT_NE(spin, nullptr);
  EXPECT_EQ(spin->count, 2 * kPairs);
  EXPECT_GE(spin->total_s, 2 * kPairs * 2e-3) << "a kernel's own time adds up its concurrent instances";
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(KernelBusyMeterCuda, CopiesAndSetsAreCountedApart) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device: the kernel-busy meter is unverified";
  constexpr size_t kBytes = size_t{16} << 20;
  void* device = nullptr;
  void* pinned = nullptr;  // one DMA per copy
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, kBytes), cudaSuccess);
  char* host = static_cast<char*>(pinned);
  KernelBusyMeter meter;
  meter.start();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaMemsetAsync(device, i, kBytes, /*stream=*/nullptr), cudaSuccess);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaMemcpy(host, device, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  const KernelBusy busy = meter.stop();
  EXPECT_EQ(busy.memset.count, 3);
  EXPECT_EQ(busy.memcpy.count, 2);
  EXPECT_GT(busy.memcpy.busy_s, 0);
  EXPECT_EQ(host[kBytes - 1], 2);
  cudaFreeHost(pinned);
  cudaFree(device);
}

TEST(KernelBusyMeterCuda, OneMeterRecordsAtATime) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device: the kernel-busy meter is unverified";
  KernelBusyMeter first, second;
  EXPECT_THROW(first.stop(), InternalError);
  first.start();
  EXPECT_THROW(second.start(), InternalError);
  const KernelBusy busy = first.stop();
  EXPECT_EQ(busy.kernels.count, 0);
  second.start();  // free again once the first stopped
  second.stop();
}

}  // namespace
}  // namespace deepinfer::engine::cuda
