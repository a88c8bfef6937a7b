#pragma once
// What the CUDA build's ATen bindings (kernels.cpp, kernels_fp8.cpp, kernels_linear.cpp) share: a
// kernel's cudaError_t as an exception naming it, the current stream of a tensor's device, and
// the 16-byte alignment the kernels' vector loads need. CUDA build only.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace deepinfer::model::cuda::binding {

inline void check(cudaError_t error, const char* kernel) { TORCH_CHECK(error == cudaSuccess, kernel, ": ", cudaGetErrorString(error)); }

inline cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

inline bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

}  // namespace deepinfer::model::cuda::binding
