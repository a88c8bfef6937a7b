#pragma once
// Shared by dense_gemm.cu and dense_gemm_f32.cu: the current device and its multiprocessor
// count, cached per device (the tile choice needs it on every call).

#include <cuda_runtime_api.h>

namespace deepinfer::model::cuda {

cudaError_t dense_gemm_device(int& device, int& sms);

}  // namespace deepinfer::model::cuda
