// tests/engine/spin_kernel.h.
#include "tests/engine/spin_kernel.h"

namespace deepinfer::engine::kernel_busy_testing {
namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(uint64_t ns) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
  }
}

}  // namespace

cudaError_t launch_spin(uint64_t ns, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace deepinfer::engine::kernel_busy_testing
