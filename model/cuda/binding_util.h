#pragma once
// What the CUDA build's ATen bindings (kernels.cpp, kernels_attention.cpp, kernels_fp8.cpp,
// kernels_linear.cpp) share: a kernel's cudaError_t as an exception naming it, the current stream
// of a tensor's device, the 16-byte alignment the kernels' vector loads need, and the check that a
// kernel's tensors are placed so. CUDA build only.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <initializer_list>

namespace deepinfer::model::cuda::binding {

inline void check(cudaError_t error, const char* kernel) { TORCH_CHECK(error == cudaSuccess, kernel, ": ", cudaGetErrorString(error)); }

inline cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

inline bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// The kernels' mma.sync, ldmatrix and cp.async need sm_80 or later.
inline bool tensor_cores_on(at::Device device) {
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index()) == cudaSuccess && major >= 8;
}

// Every defined tensor of `all` on `device`, and those of `copied` (read by 16-byte cp.async)
// 16-byte aligned.
inline void check_placed(const char* kernel, at::Device device, std::initializer_list<const at::Tensor*> all,
                         std::initializer_list<const at::Tensor*> copied) {
  for (const at::Tensor* t : all)
    TORCH_CHECK(!t->defined() || t->device() == device, kernel, ": every tensor must be on ", device, ", got one on ", t->device());
  for (const at::Tensor* t : copied)
    TORCH_CHECK(!t->defined() || aligned16(*t), kernel, ": q, keys and rows must be 16-byte aligned, got one at ", t->data_ptr());
}

}  // namespace deepinfer::model::cuda::binding
