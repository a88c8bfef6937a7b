#pragma once
// A kernel of known length for the kernel-busy meter's GPU test: one thread that spins until the
// GPU's global timer has advanced by `ns` nanoseconds. Torch-free; C++17.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::engine::kernel_busy_testing {

cudaError_t launch_spin(uint64_t ns, cudaStream_t stream);

}  // namespace deepinfer::engine::kernel_busy_testing
